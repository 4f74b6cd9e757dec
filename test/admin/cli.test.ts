/**
 * `basalt admin create|list|passwd|delete` and `basalt users sign-in-methods|reset-mfa|unlink|unlock`
 * (docs/admin.md), through the same services as the admin API, audited as the command line.
 * Runs the executable's command line (test/helpers/cli.ts) against the executable
 * (scripts/test.ts); rows are prepared and read by a platform opened on the database between
 * the commands, as an operator's psql would.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { basaltCommand, basaltEnv, runCli } from '../helpers/cli';
import { eventually } from '../helpers/wait';
import { openPlatform } from '../../src/platform';

describe.each(ENGINES)('basalt admin (CLI) on %s', (engine) => {
  let db: FreshDb;
  const cli = (...args: string[]) => runCli(args, db.env);
  beforeAll(async () => {
    db = await freshDb(engine);
  }, 60_000);
  afterAll(() => db.drop());

  test("users sign-in-methods, reset-mfa, unlink, unlock: the admin API's services, audited as the CLI", async () => {
    const address = `cli-user-${engine}@example.com`;
    const open = () => openPlatform({ env: { ...db.env, BASALT_LOG_LEVEL: 'silent' }, migrate: true });
    let p = await open();
    try {
      const { rows } = await p.db.query<{ id: string }>(
        `INSERT INTO basalt.users (email, password_hash) VALUES ($1, 'x') RETURNING id`,
        [address],
      );
      const id = rows[0]!.id;
      await p.db.query(
        `INSERT INTO basalt.auth_identities (user_id, provider, subject) VALUES ($1, 'github', '42'), ($1, 'corp', 'c-1')`,
        [id],
      );
      await p.db.query(`INSERT INTO basalt.auth_totp (user_id, secret, confirmed_at) VALUES ($1, 'v1.x', now())`, [id]);
      await p.db.query(
        `INSERT INTO basalt.auth_login_failures (email, window_start, failures, locked_until) VALUES ($1, now(), 0, now() + interval '10 minutes')`,
        [address],
      );
    } finally {
      await p.shutdown();
    }
    const methods = await cli('users', 'sign-in-methods', address.toUpperCase());
    expect(methods.code).toBe(0);
    expect(methods.stdout).toContain('second factor: TOTP on');
    expect(methods.stdout).toMatch(/provider github: [0-9a-f-]{36}/);
    const reset = await cli('users', 'reset-mfa', address);
    expect([reset.code, reset.stdout]).toEqual([0, expect.stringContaining('second factor of')]);
    expect((await cli('users', 'reset-mfa', address)).stdout).toContain('nothing changed');
    const unlinked = await cli('users', 'unlink', address, '--identity', 'github');
    expect([unlinked.code, unlinked.stdout]).toEqual([0, expect.stringContaining('unlinked github')]);
    const missing = await cli('users', 'unlink', address, '--identity', 'github');
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining('No such linked identity')]);
    const unlocked = await cli('users', 'unlock', address);
    expect([unlocked.code, unlocked.stdout]).toEqual([0, expect.stringContaining('unlocked (1 failure counter')]);
    expect((await cli('users', 'reset-mfa', 'nobody@example.com')).stderr).toMatch(/does not exist|not found/i);
    expect((await cli('users', 'reset-mfa')).code).toBe(2);

    p = await open();
    try {
      const audit = await p.db.query<{ action: string; actor: string; os_user: string | null }>(
        `SELECT action, actor, os_user FROM basalt.admin_audit WHERE action LIKE 'users.%' ORDER BY id`,
      );
      expect(audit.rows.map((r) => r.action)).toEqual([
        'users.reset-mfa',
        'users.reset-mfa',
        'users.unlink-identity',
        'users.unlock',
      ]);
      for (const r of audit.rows) expect(r).toMatchObject({ actor: 'cli', os_user: expect.any(String) });
      const left = await p.db.query(
        'SELECT provider FROM basalt.auth_identities i JOIN basalt.users u ON u.id = i.user_id WHERE u.email = $1',
        [address],
      );
      expect(left.rows).toEqual([{ provider: 'corp' }]);
    } finally {
      await p.shutdown();
    }
  }, 120_000);

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
    const proc = Bun.spawn([...basaltCommand(), 'serve'], {
      env: basaltEnv({ ...db.env, BASALT_WEB_PORT: '0', BASALT_LOG_LEVEL: 'info' }),
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
