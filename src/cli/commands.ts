/** Every CLI command, one list; areas append theirs. */
import type { Command } from './command';
import { coreCommands } from './core-commands';
import { keyCommands } from '../modules/keys/commands';
import { mailCommands } from '../modules/mail/commands';
import { extensionCommands } from '../extensions/commands';
import { adminCommands } from '../modules/admin/commands';
import { backupCommands } from '../modules/backup/commands';
import { databaseCommands } from '../modules/database/commands';
import { jobCommands } from '../modules/jobs/commands';
import { logCommands } from '../modules/logs/commands';

export const commands: Command[] = [
  ...coreCommands,
  ...keyCommands,
  ...mailCommands,
  ...extensionCommands,
  ...adminCommands,
  ...backupCommands,
  ...databaseCommands,
  ...jobCommands,
  ...logCommands,
];
