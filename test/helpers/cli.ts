/** Run the `basalt` command line from source as a child process. */
import { resolve } from 'node:path';

export const MAIN = resolve(import.meta.dir, '../../src/main.ts');

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

export async function runCli(
  args: string[],
  env: Record<string, string> = {},
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  const proc = Bun.spawn([process.execPath, MAIN, ...args], {
    env: childEnv(env),
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
