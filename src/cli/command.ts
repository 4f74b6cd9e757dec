import type { OpenPlatformOptions } from '../platform';
import type { Basalt } from '../services';

export interface CliIO {
  out(line: string): void;
  err(line: string): void;
}

export interface Command {
  /** e.g. `settings get`, `keys create`. */
  name: string;
  usage: string;
  summary: string;
  /** parseArgs option spec for this command's flags. */
  options?: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }>;
  /** Needs the platform open (database, settings); `migrate` says whether operator migrations run. */
  platform?: Pick<OpenPlatformOptions, 'migrate' | 'tolerateStoredSettings'> | false;
  /** Resolves to the exit code, or to nothing for 0. */
  run(args: {
    values: Record<string, unknown>;
    positionals: string[];
    platform?: Basalt;
    io: CliIO;
    globals: GlobalFlags;
    /** Another command line, run on a given platform (`basalt serve`'s management socket). */
    runInProcess: RunInProcess;
  }): Promise<number> | Promise<void>;
}

export type RunInProcess = (argv: string[], io: CliIO, platform: Basalt) => Promise<number>;

export interface GlobalFlags {
  config?: string;
  data?: string;
  dev?: boolean;
}

/** A usage error: printed with the command's usage, exit code 2. */
export class UsageError extends Error {}

/** The command's first operand, or a usage error saying what is missing (`templates show needs a NAME`). */
export function operand(positionals: string[], missing: string): string {
  const value = positionals[0];
  if (!value) throw new UsageError(missing);
  return value;
}

/**
 * A list command's answer: with `--json` the rows as indented JSON; else `empty` when
 * there are none (a line saying so, never silence), or what `print` writes for each row.
 */
export function printList<T>(
  io: CliIO,
  rows: readonly T[],
  opts: { json: unknown; empty: string; print: (row: T) => void },
): void {
  if (opts.json) io.out(JSON.stringify(rows, null, 2));
  else if (!rows.length) io.out(opts.empty);
  else for (const r of rows) opts.print(r);
}
