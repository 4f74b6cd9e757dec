#!/usr/bin/env bun
/**
 * The `basalt` command line: `serve` (default), `migrate`, `settings`, `version`, and
 * the commands areas add in src/cli/commands.ts. Errors are one line on stderr and a
 * non-zero exit code.
 */
import { parseArgs } from 'node:util';
import { commands } from './cli/commands';
import { UsageError, type CliIO, type Command, type GlobalFlags } from './cli/command';
import { openBasalt, type Basalt } from './services';
import { runRemote } from './cli/control-socket';
import { ConfigError } from './config/validate';
import { DataDirLockedError } from './db/datadir-lock';
import { DatabaseUnavailableError, DiskFullError } from './db/engine';
import { MigrationError } from './db/migrate';
import { VERSION } from './version';
import { serveWithPurgeDelay } from './allocator';

const GLOBAL = {
  config: { type: 'string' },
  data: { type: 'string' },
  dev: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const io: CliIO = { out: (l) => console.log(l), err: (l) => console.error(l) };

/** Help and usage lines fit a terminal of this many columns. */
const COLUMNS = 100;

/** `text` in lines of at most `width` columns, broken at spaces; continuation lines start with `indent`. */
export function wrap(text: string, width = COLUMNS, indent = ''): string[] {
  const lead = /^ */.exec(text)![0];
  // An option group in brackets (`[--tables t1,t2]`) stays on one line.
  const words = text.slice(lead.length).match(/\[[^\]]*\]|\S+/g) ?? [];
  const lines: string[] = [];
  let line = lead;
  for (const word of words) {
    if (line.trim() && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent + word;
    } else line = line.trim() ? `${line} ${word}` : line + word;
  }
  if (line) lines.push(line);
  return lines;
}

/** A command's usage, wrapped under its name: `basalt keys create --type …` then aligned options. */
function usageLines(usage: string, lead: string): string[] {
  const name = commands.find((c) => usage.startsWith(`basalt ${c.name} `) || usage === `basalt ${c.name}`)?.name;
  const indent = ' '.repeat(lead.length + (name ? `basalt ${name} `.length : 'basalt '.length));
  return wrap(lead + usage, COLUMNS, indent);
}

function help(): string {
  return [
    `basalt ${VERSION} — application platform: public auth, database, mail and extension APIs`,
    '',
    'Usage:',
    ...commands.flatMap((c) => [...usageLines(c.usage, '  '), ...wrap(`      ${c.summary}`, COLUMNS, '      ')]),
    '',
    'Global options:',
    '  --config FILE   read settings from FILE (default ./basalt.toml when present)',
    '  --data DIR      data directory (embedded database, files); same as data.dir',
    '  --dev           verbose logs',
    "  -h, --help      this help, or a command's usage",
    '',
    'Precedence: environment (BASALT_*) > config file > settings stored in the database > defaults.',
    "Run 'basalt settings list' to see every setting and where its value comes from.",
  ].join('\n');
}

/** The commands of one group (`basalt admin …`), with their usage and summary. */
function groupHelp(group: string, members: Command[]): string {
  return [
    `basalt ${group} commands:`,
    ...members.flatMap((c) => [...usageLines(c.usage, '  '), ...wrap(`      ${c.summary}`, COLUMNS, '      ')]),
    '',
    `Run 'basalt ${group} COMMAND --help' for one command's usage.`,
  ].join('\n');
}

function findCommand(argv: string[]): { cmd: Command; rest: string[] } | undefined {
  const words = argv.filter((a) => !a.startsWith('-'));
  for (const c of [...commands].sort((a, b) => b.name.length - a.name.length)) {
    const parts = c.name.split(' ');
    if (parts.every((w, i) => words[i] === w)) {
      const rest = [...argv];
      for (const w of parts) rest.splice(rest.indexOf(w), 1);
      return { cmd: c, rest };
    }
  }
  return undefined;
}

type Parsed = { cmd: Command; values: Record<string, unknown>; positionals: string[]; globals: GlobalFlags };

/** The command and its flags, or the exit code after printing help or a usage error. */
function parseCommand(argv: string[], io: CliIO): Parsed | number {
  const noCommand = argv.filter((a) => !a.startsWith('-')).length === 0;
  if ((noCommand && (argv.includes('--help') || argv.includes('-h'))) || argv[0] === 'help') {
    io.out(help());
    return 0;
  }
  const found = noCommand ? { cmd: commands.find((c) => c.name === 'serve')!, rest: argv } : findCommand(argv);
  if (!found) {
    // A group's name alone (`basalt admin`, `basalt keys --help`): its commands.
    const group = argv.find((a) => !a.startsWith('-'))!;
    const members = commands.filter((c) => c.name.startsWith(`${group} `));
    if (members.length) {
      const asked = argv.includes('--help') || argv.includes('-h');
      (asked ? io.out : io.err)(groupHelp(group, members));
      return asked ? 0 : 2;
    }
    io.err(`basalt: unknown command '${argv.filter((a) => !a.startsWith('-')).join(' ')}'\n\n${help()}`);
    return 2;
  }
  const { cmd, rest } = found;
  let parsed: { values: unknown; positionals: string[] };
  try {
    parsed = parseArgs({
      args: rest,
      options: { ...GLOBAL, ...(cmd.options ?? {}) },
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    io.err(`basalt ${cmd.name}: ${(e as Error).message}\n${usageLines(cmd.usage, 'usage: ').join('\n')}`);
    return 2;
  }
  const values = parsed.values as Record<string, unknown>;
  if (values.help) {
    io.out(`${usageLines(cmd.usage, 'usage: ').join('\n')}\n\n${wrap(cmd.summary).join('\n')}`);
    return 0;
  }
  const globals: GlobalFlags = {
    config: values.config as string,
    data: values.data as string,
    dev: values.dev as boolean,
  };
  return { cmd, values, positionals: parsed.positionals, globals };
}

/** Run a parsed command with `platform` (or none); usage and fatal errors become exit codes. */
async function execute({ cmd, values, positionals, globals }: Parsed, io: CliIO, platform?: Basalt): Promise<number> {
  try {
    const code = await cmd.run({ values, positionals, platform, io, globals, runInProcess });
    return typeof code === 'number' ? code : 0;
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`basalt ${cmd.name}: ${e.message}\n${usageLines(cmd.usage, 'usage: ').join('\n')}`);
      return 2;
    }
    io.err(`basalt: ${describeFatal(e)}`);
    return 1;
  }
}

/**
 * A command line run inside the serving process for the management socket
 * (src/cli/control-socket.ts): the same commands, on that process's platform.
 */
export async function runInProcess(argv: string[], io: CliIO, platform: Basalt): Promise<number> {
  const parsed = parseCommand(argv, io);
  if (typeof parsed === 'number') return parsed;
  if (!parsed.cmd.platform) {
    io.err(`basalt ${parsed.cmd.name}: not available while the server runs; run it directly`);
    return 2;
  }
  return execute(parsed, io, platform);
}

export async function main(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv, io);
  if (typeof parsed === 'number') return parsed;
  const { cmd, globals } = parsed;
  // Before anything is opened: this may run the process again with the allocator's setting (src/allocator.ts).
  if (cmd.name === 'serve') serveWithPurgeDelay();
  if (!cmd.platform) return execute(parsed, io);
  let platform: Basalt;
  try {
    platform = await openBasalt({
      configFile: globals.config,
      flags: { 'data.dir|--data': globals.data },
      migrate: cmd.platform.migrate ?? false,
      tolerateStoredSettings: cmd.platform.tolerateStoredSettings,
    });
  } catch (e) {
    // The embedded data dir is held by a running server: run the command inside it.
    if (e instanceof DataDirLockedError && e.dir) {
      const code = await runRemote(e.dir, argv, io);
      if (code !== undefined) return code;
    }
    io.err(`basalt: ${describeFatal(e)}`);
    return 1;
  }
  try {
    return await execute(parsed, io, platform);
  } finally {
    await platform.shutdown();
  }
}

/** One line an operator can act on. */
export function describeFatal(e: unknown): string {
  if (e instanceof ConfigError || e instanceof DataDirLockedError || e instanceof MigrationError) return e.message;
  if (e instanceof DiskFullError) return `${e.message}; free some space and run the command again`;
  if (e instanceof DatabaseUnavailableError)
    return `database.url: cannot connect to the database (${e.message}); is the server running and the URL right?`;
  const err = e as { code?: string; message?: string };
  if (err?.code === '28P01' || err?.code === '28000') return `database.url: authentication failed (${err.message})`;
  if (err?.code === '3D000') return `database.url: ${err.message}; create it first`;
  return (err?.message ?? String(e)).split('\n')[0]!;
}

if (import.meta.main) {
  // Private by default: whatever this process creates (database, uploads, backups,
  // sockets) is its user's alone, whatever umask it was started with (docs/operations.md).
  process.umask(0o077);
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      console.error(`basalt: ${describeFatal(e)}`);
      process.exit(1);
    },
  );
}
