/**
 * The executable target of `startServer` (test/helpers/server.ts). When
 * BASALT_TEST_EXECUTABLE names a compiled `basalt` (`npm run test:executable` builds one
 * and runs the suites listed in scripts/test.ts with it), a suite's server is
 * that executable in its own process — the test's database, the repository's extensions,
 * nothing of this checkout on its PATH — instead of the platform in this process.
 *
 * What a suite changes as an operator (live settings, API keys, extension settings) goes
 * through the admin API, signed in once through the one-time setup link the executable
 * prints at its first start (or, when the suite created an administrator first, as an
 * administrator made with the executable's `basalt admin create`), so both targets answer
 * the same calls.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { bareEnv, freePort, runBinary, untilHealthy, untilReady } from './binary';
import { eventually } from './wait';

/** The compiled executable the suites run against, or '' to run them on the source. */
export const EXECUTABLE = process.env.BASALT_TEST_EXECUTABLE ? resolve(process.env.BASALT_TEST_EXECUTABLE) : '';

const ROOT = resolve(import.meta.dir, '../..');
const ADMIN_PASSWORD = 'executable control 1234';
const CONTROL_EMAIL = 'control@example.com';

export interface ExecutableServer {
  url: string;
  publicUrl: string;
  /** The process id of `basalt serve`. */
  pid: number;
  /** What it printed so far (stdout and stderr). */
  output(): string;
  /** Headers of a signed-in admin session (cookie, CSRF token, same-origin), signed in on first use. */
  adminHeaders(): Promise<Record<string, string>>;
  /** SIGTERM, then wait for the exit (SIGKILL after 20 s); rejects when it did not exit with 0. */
  stop(): Promise<void>;
}

function collect(stream: ReadableStream<Uint8Array>, into: string[]): void {
  const decoder = new TextDecoder();
  void (async () => {
    for await (const chunk of stream) into.push(decoder.decode(chunk, { stream: true }));
  })().catch(() => {});
}

/**
 * Start `basalt serve` with `env` (the test database's and the suite's settings). The main
 * and public ports are free ports unless `env` names them; the repository's extensions are
 * loaded unless `env` names another directory, as on the source (whose working directory
 * is the checkout).
 */
export async function startExecutable(env: Record<string, string>, cwd: string): Promise<ExecutableServer> {
  const port = env.BASALT_WEB_PORT && env.BASALT_WEB_PORT !== '0' ? env.BASALT_WEB_PORT : String(await freePort());
  const publicPort =
    env.BASALT_WEB_PUBLIC_PORT && env.BASALT_WEB_PUBLIC_PORT !== '0'
      ? env.BASALT_WEB_PUBLIC_PORT
      : String(await freePort());
  const split = env.BASALT_WEB_PUBLIC_API_SEPARATE === 'true';
  const proc: Subprocess<'ignore', 'pipe', 'pipe'> = Bun.spawn([EXECUTABLE, 'serve'], {
    cwd,
    env: bareEnv(cwd, {
      BASALT_EXTENSIONS_DIR: resolve(ROOT, 'extensions'),
      ...env,
      BASALT_WEB_PORT: port,
      BASALT_WEB_PUBLIC_PORT: publicPort,
    }),
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const printed: string[] = [];
  collect(proc.stdout, printed);
  collect(proc.stderr, printed);
  const output = () => printed.join('');
  const url = `http://127.0.0.1:${port}`;
  const publicUrl = split ? `http://127.0.0.1:${publicPort}` : url;
  /** Stop the process (when it still runs) and fail with `why` and what it printed. */
  const giveUp = async (why: string): Promise<never> => {
    proc.kill('SIGKILL');
    await proc.exited;
    throw new Error(`basalt serve ${why}:\n${output()}`);
  };
  const ready = await untilHealthy(proc, url, 100_000);
  if (ready !== true) await giveUp(`did not become healthy (${ready})`);
  // /healthz answers as soon as the listeners are up; `serve` prints its start-up lines and (embedded)
  // opens the management socket a moment later, and only then handles SIGTERM. Wait for that, so a
  // suite that stops the server at once stops it gracefully.
  const external = Boolean(env.BASALT_DATABASE_URL);
  const started = await untilReady(
    proc,
    () =>
      output().includes(' is running (') && (external || existsSync(join(env.BASALT_DATA_DIR ?? cwd, 'basalt.sock'))),
    30_000,
  );
  // What the server printed says why: a start that failed after the listeners were up, or one still busy.
  if (started !== true)
    await giveUp(
      `answered /healthz but ${started === 'exited' ? `exited (${proc.exitCode})` : 'did not finish starting within 30 s'} (no start-up lines${external ? '' : ' or management socket'})`,
    );

  let admin: Promise<Record<string, string>> | undefined;
  const signIn = async () => {
    // Printed after the listeners are up, so it may follow the first /healthz answer by a moment.
    const token = await eventually(() => /setup\?token=([^\s&]+)/.exec(output())?.[1] ?? false, {
      timeout: 10_000,
      what: 'the setup link on stderr',
    });
    const post = (path: string, body: unknown) =>
      fetch(url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' },
        body: JSON.stringify(body),
      });
    let r = await post('/api/admin/auth/setup', { token, email: CONTROL_EMAIL, password: ADMIN_PASSWORD });
    if (r.status === 410) {
      // The suite created an administrator first (test/helpers/admin.ts), which spends the setup
      // link: the control administrator is made with the executable's command line instead.
      const made = await runBinary(
        EXECUTABLE,
        ['admin', 'create', '--email', CONTROL_EMAIL, '--password', ADMIN_PASSWORD],
        env.BASALT_DATA_DIR ?? cwd,
        env,
      );
      if (made.code !== 0) throw new Error(`basalt admin create failed (${made.code}): ${made.stderr}`);
      r = await post('/api/admin/auth/login', { email: CONTROL_EMAIL, password: ADMIN_PASSWORD });
    }
    const body = (await r.json()) as { data?: { csrf_token?: string } };
    const cookie = (r.headers.get('set-cookie') ?? '').split(';')[0]!;
    if (r.status >= 300 || !body.data?.csrf_token)
      throw new Error(`admin setup failed: ${r.status} ${JSON.stringify(body)}`);
    return { cookie, 'x-csrf-token': body.data.csrf_token, 'sec-fetch-site': 'same-origin' };
  };

  return {
    url,
    publicUrl,
    pid: proc.pid,
    output,
    adminHeaders: () => (admin ??= signIn()),
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
      const code = await proc.exited;
      clearTimeout(timer);
      if (code !== 0) throw new Error(`basalt serve exited with ${code} after SIGTERM:\n${output().slice(-4000)}`);
    },
  };
}
