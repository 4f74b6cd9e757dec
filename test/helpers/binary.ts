/**
 * The compiled executable, built once per test run with build.ts into a temp dir (or the
 * one BASALT_TEST_BUILT names, so CI builds once for every suite), and started the way an
 * operator would: copied alone into an empty directory, with no Bun and no node_modules on
 * its PATH.
 */
import { copyFileSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { eventually } from './wait';

const ROOT = resolve(import.meta.dir, '../..');
let built: Promise<string> | undefined;

/** build.ts into a new temp dir (with `args`); the executable's path. */
async function build(args: string[] = []): Promise<string> {
  const out = join(mkdtempSync(join(tmpdir(), 'basalt-build-')), 'basalt');
  const proc = Bun.spawn([process.execPath, join(ROOT, 'build.ts'), '--outfile', out, ...args], {
    cwd: ROOT,
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`build.ts failed (${code}): ${err}`);
  return out;
}

export function buildBinary(): Promise<string> {
  const given = process.env.BASALT_TEST_BUILT;
  if (given) return Promise.resolve(resolve(given));
  return (built ??= build());
}

/** Another build of the executable, stamped with `version` (build.ts --version): what an upgrade installs. */
export function buildVersion(version: string): Promise<string> {
  return build(['--version', version]);
}

/** A fresh empty directory holding only a copy of the executable. */
export async function installBinary(): Promise<{ dir: string; exe: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'basalt-install-'));
  const exe = join(dir, 'basalt');
  copyFileSync(await buildBinary(), exe);
  return { dir, exe };
}

/** Environment with nothing of this checkout: no Bun, no node_modules, only system paths. */
export function bareEnv(dir: string, env: Record<string, string> = {}): Record<string, string> {
  return { PATH: '/usr/bin:/bin', HOME: dir, ...env };
}

export async function runBinary(exe: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  const proc = Bun.spawn([exe, ...args], { cwd, env: bareEnv(cwd, env), stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, stdout, stderr };
}

/** Start `basalt serve` and wait until /healthz answers; returns the process and its base URL. */
export async function serveBinary(
  exe: string,
  cwd: string,
  env: Record<string, string> = {},
  timeoutMs = 120_000, // a fresh embedded database (initdb) on a loaded machine
): Promise<{ proc: Subprocess<'ignore', 'pipe', 'pipe'>; url: string; output: () => Promise<string> }> {
  const port = await freePort();
  const proc = Bun.spawn([exe, 'serve'], {
    cwd,
    env: bareEnv(cwd, { BASALT_WEB_PORT: String(port), ...env }),
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const url = `http://127.0.0.1:${port}`;
  const healthy = await untilHealthy(proc, url, timeoutMs);
  // /healthz answers as soon as the listeners are up; on the embedded engine `serve` opens the
  // management socket a moment later, and until then a CLI command beside it finds the data dir in use.
  const socket = join(resolve(cwd, env.BASALT_DATA_DIR ?? 'basalt_data'), 'basalt.sock');
  if (healthy === true && !env.BASALT_DATABASE_URL)
    await eventually(() => existsSync(socket) || proc.exitCode !== null, { timeout: 30_000, what: socket }).catch(
      () => {},
    );
  if (healthy === true)
    return {
      proc,
      url,
      output: async () => (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text()),
    };
  proc.kill('SIGKILL');
  const out = (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text());
  throw new Error(`basalt serve did not become healthy within ${timeoutMs} ms:\n${out}`);
}

/**
 * Wait until `ready` holds for the running process `proc` (true), or it exits first
 * ('exited'), or neither within `timeout` ms ('timeout').
 */
export function untilReady(
  proc: Subprocess<'ignore', 'pipe', 'pipe'>,
  ready: () => boolean | Promise<boolean>,
  timeout: number,
): Promise<true | 'exited' | 'timeout'> {
  return eventually(async () => (proc.exitCode !== null ? ('exited' as const) : await ready()), {
    timeout,
    interval: 50,
  }).then(
    (v) => (v === 'exited' ? v : true),
    () => 'timeout' as const,
  );
}

/** `untilReady`: until the `basalt serve` process `proc` answers /healthz at `url`. */
export function untilHealthy(
  proc: Subprocess<'ignore', 'pipe', 'pipe'>,
  url: string,
  timeout: number,
): Promise<true | 'exited' | 'timeout'> {
  return untilReady(
    proc,
    () =>
      fetch(url + '/healthz').then(
        (r) => r.ok,
        () => false,
      ),
    timeout,
  );
}

/** Ports this process has handed out: the kernel may offer a port it just freed again. */
const handedOut = new Set<number>();

/**
 * A port free on 127.0.0.1 now and not handed out before in this process, so two calls in a
 * row (a server's main and public port) never name the same one.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const s = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() });
    const port = s.port!;
    s.stop(true);
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}
