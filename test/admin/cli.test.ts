/** `basalt admin create|list|passwd|delete` (docs/admin.md), through the same service as the admin API. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { MAIN, childEnv, runCli } from '../helpers/cli';
import { eventually } from '../helpers/wait';

describe.each(ENGINES)('basalt admin (CLI) on %s', (engine) => {
  let db: FreshDb;
  const cli = (...args: string[]) => runCli(args, db.env);
  beforeAll(async () => {
    db = await freshDb(engine);
  }, 60_000);
  afterAll(() => db.drop());

  test('create, list, passwd, delete; the last administrator stays', async () => {
    const one = await cli('admin', 'create', '--email', 'Ops@Example.com', '--password', 'first password 1');
    expect(one.stderr).toBe('');
    expect(one.code).toBe(0);
    expect(one.stdout).toContain('created administrator ops@example.com');
    expect(
      (await cli('admin', 'create', '--email', 'ops@example.com', '--password', 'first password 1')).stderr,
    ).toMatch(/already exists/);
    expect((await cli('admin', 'create', '--email', 'two@example.com', '--password', 'second password 2')).code).toBe(
      0,
    );

    const list = await cli('admin', 'list', '--json');
    expect(JSON.parse(list.stdout).map((a: any) => a.email)).toEqual(['ops@example.com', 'two@example.com']);
    expect(list.stdout).not.toContain('password');

    expect(
      (await cli('admin', 'passwd', '--email', 'two@example.com', '--password', 'changed password 3')).stdout,
    ).toContain('sessions have ended');
    expect((await cli('admin', 'delete', '--email', 'two@example.com')).code).toBe(0);
    const last = await cli('admin', 'delete', '--email', 'ops@example.com');
    expect(last.code).toBe(1);
    expect(last.stderr).toMatch(/last administrator cannot be deleted/);
    expect((await cli('admin', 'delete', '--email', 'nobody@example.com')).stderr).toMatch(/does not exist/);
  }, 120_000);

  const usage: [string, string[], RegExp][] = [
    ['create without --password', ['admin', 'create', '--email', 'a@example.com'], /needs --password/],
    [
      'create with a short password',
      ['admin', 'create', '--email', 'a@example.com', '--password', 'short'],
      /password: must be at least/,
    ],
    ['create with a bad e-mail', ['admin', 'create', '--email', 'nope', '--password', 'long enough 123'], /email/],
    ['delete without --email', ['admin', 'delete'], /needs --email/],
  ];
  test.each(usage)(
    '%s → a clear error, non-zero exit',
    async (_n, args, message) => {
      const r = await cli(...args);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(message);
    },
    60_000,
  );
});

describe.each(ENGINES)('basalt serve and the setup link on %s', (engine) => {
  let db: FreshDb;
  beforeAll(async () => {
    db = await freshDb(engine);
  }, 60_000);
  afterAll(() => db.drop());

  /** Start `basalt serve`, read both streams until `until` matches their text, then SIGTERM it and read the rest. */
  async function serveUntil(until: RegExp): Promise<{ out: string; code: number }> {
    const proc = Bun.spawn([process.execPath, MAIN, 'serve'], {
      env: childEnv({ ...db.env, BASALT_WEB_PORT: '0', BASALT_LOG_LEVEL: 'info' }),
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const timer = setTimeout(() => proc.kill('SIGKILL'), 50_000);
    let out = '';
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) out += decoder.decode(chunk);
    };
    const done = Promise.all([pump(proc.stdout), pump(proc.stderr)]);
    // Until the match, or the exit (the timer above ends it after 50 s).
    await eventually(() => until.test(out) || proc.exitCode !== null, {
      timeout: 60_000,
      interval: 50,
      what: `output matching ${until}`,
    });
    await Bun.sleep(1000); // whatever start-up prints after the match
    proc.kill('SIGTERM');
    const code = await proc.exited;
    await done;
    clearTimeout(timer);
    return { out, code };
  }

  test('with no administrator, serve prints the link as a log line and as a plain line; with one, it does not', async () => {
    const first = await serveUntil(/\(or run: basalt admin create/);
    expect(first.code).toBe(0);
    expect(first.out).toMatch(
      /No administrator yet\. Create the first one within 30 minutes at:\n {2}http:\/\/127\.0\.0\.1:\d+\/_\/#\/setup\?token=[A-Za-z0-9_-]{43}\n/,
    );
    // The log line points at it without the token: only the terminal gets the secret.
    expect(first.out).toContain('"msg":"no administrator yet: open the one-time setup link printed on stderr');
    expect(first.out.match(/setup\?token=/g)).toHaveLength(1);
    expect(
      (await runCli(['admin', 'create', '--email', 'first@example.com', '--password', 'first password 1'], db.env))
        .code,
    ).toBe(0);
    const second = await serveUntil(/"msg":"listening"|"listening"/);
    expect(second.code).toBe(0);
    expect(second.out).toContain('listening');
    expect(second.out).not.toContain('setup?token=');
  }, 120_000);
});
