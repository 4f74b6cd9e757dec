/**
 * `basalt types` (docs/client.md, Types): the data schema as TypeScript declarations for the
 * JS client, as a role sees it.
 */
import { writeFileSync } from 'node:fs';
import type { Command } from '../../cli/command';
import { UsageError } from '../../cli/command';
import { hasPermission } from '../../http/api-key-guard';
import { TYPES_ROLES, type TypesRole } from './types';

export const databaseCommands: Command[] = [
  {
    name: 'types',
    usage: 'basalt types [--role user|anon|service] [--key KEY] [--out FILE]',
    summary:
      'Print TypeScript declarations (Row, Insert, Update, Relations per table) of the data schema as a role (or an API key: a service key its whitelist, a public key as anon) sees it, for createClient<DB> (docs/client.md).',
    options: { role: { type: 'string' }, key: { type: 'string' }, out: { type: 'string' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const p = platform!;
      let role = (values.role ?? 'user') as TypesRole;
      if (!TYPES_ROLES.includes(role))
        throw new UsageError(`--role '${role}': must be one of ${TYPES_ROLES.join(', ')}`);
      let whitelist: string[] | undefined;
      if (typeof values.key === 'string') {
        if (values.role !== undefined) throw new UsageError('give --role or --key, not both: a key decides the role');
        const key = await p.services.keys.verify(values.key, { recordUse: false });
        if (!key) throw new UsageError('--key: no active key has this value (unknown, revoked or expired)');
        if (key.type === 'public') role = 'anon';
        else {
          role = 'service';
          whitelist = hasPermission(key, 'db:query') ? key.tables : [];
        }
      }
      const text = await p.services.database.types(role, whitelist);
      if (typeof values.out === 'string') {
        writeFileSync(values.out, text);
        io.out(`wrote ${values.out}`);
      } else io.out(text.trimEnd());
    },
  },
];
