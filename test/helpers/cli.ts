/**
 * Run the `basalt` command line as a child process: from source, or — when
 * BASALT_TEST_EXECUTABLE names a compiled `basalt` (the suites of scripts/test.ts's
 * EXECUTABLE_SUITES) — that executable, with nothing of this checkout on its PATH.
 */
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { bareEnv } from './binary';
import { EXECUTABLE } from './executable-server';

export const MAIN = resolve(import.meta.dir, '../../src/main.ts');

/** The command that starts `basalt` (arguments follow): the executable, or Bun with src/main.ts. */
export function basaltCommand(): string[] {
  return EXECUTABLE ? [EXECUTABLE] : [process.execPath, MAIN];
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Environment for a child: the parent's minus BASALT_* settings, plus `env`. */
export function childEnv(env: Record<string, string>): Record<string, string> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('BASALT_') && k !== 'DATABASE_URL') base[k] = v;
  return { ...base, BASALT_LOG_LEVEL: 'warn', ...env };
}

/** Environment for `basaltCommand()`: childEnv's on the source; the executable's holds only `env` and system paths. */
export function basaltEnv(env: Record<string, string>, cwd?: string): Record<string, string> {
  return EXECUTABLE ? bareEnv(cwd ?? tmpdir(), { BASALT_LOG_LEVEL: 'warn', ...env }) : childEnv(env);
}

export async function runCli(
  args: string[],
  env: Record<string, string> = {},
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  const proc = Bun.spawn([...basaltCommand(), ...args], {
    env: basaltEnv(env, opts.cwd),
    cwd: opts.cwd,
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const timer = setTimeout(() => proc.kill('SIGKILL'), opts.timeoutMs ?? 55_000);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}
