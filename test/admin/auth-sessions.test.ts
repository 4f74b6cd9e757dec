/**
 * Administrator sessions in the database (docs/admin-api.md §Sessions and CSRF, docs/admin.md):
 * the setup link (printed by serve, only its hash stored, spent once even when raced), only a
 * session's hash stored, sign-in lock counters, and the session lifetimes. On the source only:
 * setup tokens are issued, expired and administrators deleted, and session times moved, in
 * the database of this process. The HTTP side of signing in runs against the executable too:
 * auth.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { ADMIN_PASSWORD, adminReq, createAdmin, signInAdmin } from '../helpers/admin';
import { adminEmail, auditRows, ip, login, startAdminServer } from './support';
import { expectA, expectAError } from '../helpers/envelopes';

const tokenOf = (link: string) => new URL(link.replace('#/setup', '/setup')).searchParams.get('token')!;
const setup = (s: TestServer, token: string, email = adminEmail(), headers: Record<string, string> = {}) =>
  s.req('POST', '/api/admin/auth/setup', {
    body: { token, email, password: ADMIN_PASSWORD },
    headers: { 'sec-fetch-site': 'same-origin', 'x-forwarded-for': ip(), ...headers },
  });

describe.each(ENGINES)('admin setup link on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAdminServer(engine);
  }, 60_000);
  afterAll(() => s.stop());

  test('serve prints a link to /_/#/setup with a 32-byte token while no administrator exists; only its hash is stored', async () => {
    expect(s.running.setupLink).toMatch(new RegExp(`^${s.url}/_/#/setup\\?token=[A-Za-z0-9_-]{43}$`));
    expectA(await s.req('GET', '/api/admin/auth/state'), 200, { setup_required: true, signed_in: false });
    const { rows } = await s.platform.db.query<{ token_hash: Uint8Array }>(
      'SELECT token_hash FROM basalt.admin_setup_tokens',
    );
    expect(rows.length).toBe(1);
    expect(Buffer.from(rows[0]!.token_hash).toString('base64url')).not.toBe(tokenOf(s.running.setupLink!));
  });

  const refusals: [string, () => Promise<string>][] = [
    ['an unknown token', async () => 'x'.repeat(43)],
    ['a malformed token', async () => 'not-a-token'],
    [
      'an expired token',
      async () => {
        const token = (await s.platform.services.admin.issueSetupToken())!;
        await s.platform.db.query(
          `UPDATE basalt.admin_setup_tokens SET expires_at = now() - interval '1 second' WHERE used_at IS NULL AND created_at = (SELECT max(created_at) FROM basalt.admin_setup_tokens)`,
        );
        return token;
      },
    ],
  ];
  test.each(refusals)('%s → 410 setup_link_invalid, no administrator', async (_name, token) => {
    const r = await setup(s, await token());
    expectAError(r, 410, 'setup_link_invalid');
    expect((await s.platform.services.admin.list()).length).toBe(0);
  });

  test('two people racing one link: one administrator, the other 410; the link is spent; a second instance-style link dies with it', async () => {
    const other = (await s.platform.services.admin.issueSetupToken())!; // e.g. printed by a second instance
    const token = tokenOf(s.running.setupLink!);
    const [a, b] = await Promise.all([setup(s, token), setup(s, token)]);
    expect([a.status, b.status].sort()).toEqual([201, 410]);
    const won = a.status === 201 ? a : b;
    expect(won.body.data).toEqual({
      admin: expect.objectContaining({ email: expect.any(String), id: expect.any(String) }),
      csrf_token: expect.any(String),
    });
    expect(won.headers.get('set-cookie')).toMatch(/^basalt_admin=[A-Za-z0-9_-]{43}; /);
    expect((await s.platform.services.admin.list()).length).toBe(1);
    expect((await setup(s, token)).status).toBe(410);
    expect((await setup(s, other)).status).toBe(410);
    expect((await s.req('GET', '/api/admin/auth/state')).body.data.setup_required).toBe(false);
    // The new session works, and the setup was audited in its transaction.
    const cookie = won.headers.get('set-cookie')!.split(';')[0]!;
    expect((await s.req('GET', '/api/admin/auth/me', { headers: { cookie } })).status).toBe(200);
    expect((await auditRows(s, 'auth.setup')).length).toBe(1);
    expect(await s.platform.services.admin.issueSetupToken()).toBeUndefined();
  });

  test('racing two different links (two instances): still one administrator', async () => {
    // Fresh state: delete the administrator directly (the API never deletes the last one).
    await s.platform.db.query('DELETE FROM basalt.admins');
    const [t1, t2] = [
      (await s.platform.services.admin.issueSetupToken())!,
      (await s.platform.services.admin.issueSetupToken())!,
    ];
    const [a, b] = await Promise.all([setup(s, t1), setup(s, t2)]);
    expect([a.status, b.status].sort()).toEqual([201, 410]);
    expect((await s.platform.services.admin.list()).length).toBe(1);
  });
});

describe.each(ENGINES)('admin sessions and lock counters in the database on %s', (engine) => {
  let s: TestServer;
  let email: string;
  beforeAll(async () => {
    s = await startAdminServer(engine, { env: { BASALT_AUTH_LOCKOUT_THRESHOLD: '3' } });
    email = adminEmail();
    await createAdmin(s, email);
  }, 60_000);
  afterAll(() => s.stop());

  test('a sign-in stores only the hash of the session token', async () => {
    const r = await login(s, email, ADMIN_PASSWORD);
    expect(r.status).toBe(200);
    const token = /^basalt_admin=([^;]+)/.exec(r.headers.get('set-cookie')!)![1]!;
    const { rows } = await s.platform.db.query<{ token_hash: Uint8Array }>(
      'SELECT token_hash FROM basalt.admin_sessions',
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((x) => !Buffer.from(x.token_hash).toString('base64url').includes(token))).toBe(true);
    expect(JSON.stringify(rows)).not.toContain(token);
  });

  test('the lock of an account for one address is counted in the database (shared by every instance), apart from site users', async () => {
    const e = adminEmail('locked');
    const from = ip();
    await createAdmin(s, e);
    for (let i = 0; i < 3; i++) expect((await login(s, e, 'wrong password 123', from)).status).toBe(401);
    expectAError(await login(s, e, ADMIN_PASSWORD, from), 429, 'account_locked');
    const { rows } = await s.platform.db.query(
      'SELECT email FROM basalt.auth_login_failures WHERE locked_until > now()',
    );
    expect(rows.map((x: any) => x.email)).toContain(`admin_src:${JSON.stringify([e, from])}`);
  });

  const expiries: [string, string][] = [
    [
      'idle longer than admin.session_idle_minutes',
      `UPDATE basalt.admin_sessions SET last_seen_at = now() - interval '121 minutes' WHERE id = $1`,
    ],
    [
      'older than admin.session_max_hours however active',
      `UPDATE basalt.admin_sessions SET created_at = now() - interval '12 hours 1 minute' WHERE id = $1`,
    ],
  ];
  test.each(expiries)('a session %s → 401', async (_n, sql) => {
    const a = await signInAdmin(s, { email, create: false });
    const id = (await s.platform.services.admin.session(a.token))!.id;
    await s.platform.db.query(sql, [id]);
    expect((await adminReq(s, a, 'GET', '/api/admin/auth/me')).status).toBe(401);
  });

  test('the lifetimes are live settings: a shorter idle timeout applies to existing sessions at once', async () => {
    const a = await signInAdmin(s, { email, create: false });
    const id = (await s.platform.services.admin.session(a.token))!.id;
    await s.platform.db.query(
      `UPDATE basalt.admin_sessions SET last_seen_at = now() - interval '10 minutes' WHERE id = $1`,
      [id],
    );
    expect((await adminReq(s, a, 'GET', '/api/admin/auth/me')).status).toBe(200);
    await s.platform.settings.set('admin.session_idle_minutes', 5);
    try {
      await s.platform.db.query(
        `UPDATE basalt.admin_sessions SET last_seen_at = now() - interval '10 minutes' WHERE id = $1`,
        [id],
      );
      expect((await adminReq(s, a, 'GET', '/api/admin/auth/me')).status).toBe(401);
    } finally {
      await s.platform.settings.unset('admin.session_idle_minutes');
    }
  });

  test('last_seen_at is written at most once a minute', async () => {
    const a = await signInAdmin(s, { email, create: false });
    const seen = async () =>
      (
        await s.platform.db.query<{ t: Date }>(
          'SELECT last_seen_at AS t FROM basalt.admin_sessions WHERE id = (SELECT id FROM basalt.admin_sessions ORDER BY created_at DESC LIMIT 1)',
        )
      ).rows[0]!.t.getTime();
    const first = await seen();
    await Bun.sleep(20);
    await adminReq(s, a, 'GET', '/api/admin/auth/me');
    expect(await seen()).toBe(first);
    await s.platform.db.query(`UPDATE basalt.admin_sessions SET last_seen_at = now() - interval '2 minutes'`);
    const old = await seen();
    await adminReq(s, a, 'GET', '/api/admin/auth/me');
    expect(await seen()).toBeGreaterThan(old + 60_000);
  });
});
