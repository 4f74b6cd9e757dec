/**
 * Administrators signing in (docs/admin-api.md §Sessions and CSRF, docs/admin.md):
 * the setup link, sign-in hardening, the cookie, session lifetimes, logout and
 * password change.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { ADMIN_PASSWORD, adminReq, signInAdmin } from '../helpers/admin';
import { CLI_ACTOR } from '../../src/modules/admin/audit';
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

describe.each(ENGINES)('admin sign-in on %s', (engine) => {
  let s: TestServer;
  let email: string;
  beforeAll(async () => {
    s = await startAdminServer(engine, {
      env: {
        BASALT_AUTH_LOCKOUT_THRESHOLD: '3',
        BASALT_AUTH_RATE_LIMIT_LOGIN_PER_IP: '4',
        BASALT_AUTH_RATE_LIMIT_LOGIN_PER_ACCOUNT: '100',
      },
    });
    email = adminEmail();
    await s.platform.services.admin.create(email, ADMIN_PASSWORD, CLI_ACTOR);
  }, 60_000);
  afterAll(() => s.stop());

  test('right password: 200 {admin, csrf_token}, a session cookie, only the hash stored, audited', async () => {
    const r = await login(s, email, ADMIN_PASSWORD);
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({
      admin: { id: expect.any(String), email, created_at: expect.any(String), last_login_at: expect.any(String) },
      csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const token = /^basalt_admin=([^;]+)/.exec(r.headers.get('set-cookie')!)![1]!;
    const { rows } = await s.platform.db.query<{ token_hash: Uint8Array }>(
      'SELECT token_hash FROM basalt.admin_sessions',
    );
    expect(rows.every((x) => !Buffer.from(x.token_hash).toString('base64url').includes(token))).toBe(true);
    expect(JSON.stringify(rows)).not.toContain(token);
    expect((await auditRows(s, 'auth.login')).at(-1)).toMatchObject({
      admin_email: email,
      action: 'auth.login',
      ip: expect.any(String),
    });
  });

  const wrong: [string, () => { email: string; password: string }][] = [
    ['a wrong password', () => ({ email, password: 'wrong password 123' })],
    ['an unknown e-mail', () => ({ email: adminEmail('nobody'), password: ADMIN_PASSWORD })],
    [
      "a site user's e-mail (never an administrator)",
      () => ({ email: 'site-user@example.com', password: ADMIN_PASSWORD }),
    ],
    ['a malformed e-mail', () => ({ email: 'not an address', password: ADMIN_PASSWORD })],
  ];
  test.each(wrong)('%s → 401 invalid_credentials, the same answer, failure audited', async (_n, make) => {
    const c = make();
    const before = (await auditRows(s, 'auth.login_failed')).length;
    const r = await login(s, c.email, c.password);
    expectAError(r, 401, 'invalid_credentials', { message: 'E-mail or password is wrong.' });
    expect(r.headers.get('set-cookie')).toBeNull();
    expect((await auditRows(s, 'auth.login_failed')).length).toBe(before + 1);
  });

  test('an unknown e-mail costs about what a wrong password costs (dummy hash)', async () => {
    const time = async (e: string) => {
      const t0 = performance.now();
      await login(s, e, 'wrong password 123');
      return performance.now() - t0;
    };
    await time(adminEmail('warm'));
    const unknown: number[] = [];
    const known: number[] = [];
    for (let i = 0; i < 2; i++) {
      unknown.push(await time(adminEmail('nobody')));
      const e = adminEmail('known');
      await s.platform.services.admin.create(e, ADMIN_PASSWORD, CLI_ACTOR);
      known.push(await time(e));
    }
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    // Both run one argon2id verify; without the dummy hash an unknown address would answer in ~1 ms.
    expect(median(unknown)).toBeGreaterThan(median(known) * 0.4);
  });

  test('lockout: failures up to auth.lockout_threshold lock the account for that address (429 account_locked with Retry-After), even with the right password', async () => {
    const e = adminEmail('locked');
    const from = ip();
    await s.platform.services.admin.create(e, ADMIN_PASSWORD, CLI_ACTOR);
    for (let i = 0; i < 3; i++) expect((await login(s, e, 'wrong password 123', from)).status).toBe(401);
    const r = await login(s, e, ADMIN_PASSWORD, from);
    expectAError(r, 429, 'account_locked', { retry_after: expect.any(Number) });
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    // Counted in the database (shared by every instance), apart from site users' counters.
    const { rows } = await s.platform.db.query(
      'SELECT email FROM basalt.auth_login_failures WHERE locked_until > now()',
    );
    expect(rows.map((x: any) => x.email)).toContain(`admin_src:${JSON.stringify([e, from])}`);
    // Another address is not locked out (test/security/admin-lockout.test.ts has the rest).
    expect((await login(s, e, ADMIN_PASSWORD, ip())).status).toBe(200);
  });

  test('rate limit per IP: past auth.rate_limit_login_per_ip a minute → 429 rate_limited with Retry-After', async () => {
    const from = ip();
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await login(s, adminEmail('spray'), 'x', from)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 429]);
    const r = await login(s, email, ADMIN_PASSWORD, from);
    expectAError(r, 429, 'rate_limited', { retry_after: expect.any(Number) });
    expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await login(s, email, ADMIN_PASSWORD, ip())).status).toBe(200);
  });

  const bodies: [string, unknown, number][] = [
    ['no body fields', {}, 400],
    ['password missing', { email: 'a@example.com' }, 400],
    ['email not a string', { email: 5, password: 'x' }, 400],
  ];
  test.each(bodies)('%s → 400 validation_error naming the field', async (_n, body, status) => {
    const r = await s.req('POST', '/api/admin/auth/login', {
      body,
      headers: { 'sec-fetch-site': 'same-origin', 'x-forwarded-for': ip() },
    });
    expectAError(r, status, 'validation_error', { details: { fields: expect.any(Object) } });
  });

  test('not JSON → 415; malformed JSON → 400 invalid_json', async () => {
    const a = await s.req('POST', '/api/admin/auth/login', {
      raw: 'email=a',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    });
    expect(a.status).toBe(415);
    const b = await s.req('POST', '/api/admin/auth/login', {
      raw: '{"email":',
      headers: { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' },
    });
    expectAError(b, 400, 'invalid_json');
  });
});

describe.each(ENGINES)('admin session cookie and lifetimes on %s', (engine) => {
  let s: TestServer;
  let email: string;
  beforeAll(async () => {
    s = await startAdminServer(engine);
    email = adminEmail();
    await s.platform.services.admin.create(email, ADMIN_PASSWORD, CLI_ACTOR);
  }, 60_000);
  afterAll(() => s.stop());

  const cookies: [string, Record<string, string>, RegExp, boolean][] = [
    ['plain HTTP', {}, /^basalt_admin=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/, false],
    [
      'HTTPS per X-Forwarded-Proto from a trusted proxy',
      { 'x-forwarded-proto': 'https' },
      /^__Host-basalt_admin=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200; Secure$/,
      true,
    ],
  ];
  test.each(cookies)('%s: %p', async (_n, headers, shape, secure) => {
    const r = await login(s, email, ADMIN_PASSWORD, ip(), headers);
    expect(r.status).toBe(200);
    const set = r.headers.get('set-cookie')!;
    expect(set).toMatch(shape);
    expect(r.headers.get('cache-control')).toBe('no-store');
    // The cookie works under its own name.
    expect((await s.req('GET', '/api/admin/auth/me', { headers: { cookie: set.split(';')[0]! } })).status).toBe(200);
    expect(set.includes('Secure')).toBe(secure);
  });

  test('X-Forwarded-Proto from an untrusted peer is ignored: no Secure cookie', async () => {
    const t = await startAdminServer(engine, { env: { BASALT_WEB_TRUSTED_PROXIES: '' } });
    try {
      const e = adminEmail();
      await t.platform.services.admin.create(e, ADMIN_PASSWORD, CLI_ACTOR);
      const r = await login(t, e, ADMIN_PASSWORD, ip(), { 'x-forwarded-proto': 'https' });
      expect(r.headers.get('set-cookie')).toMatch(/^basalt_admin=.*; SameSite=Strict; Max-Age=\d+$/);
    } finally {
      await t.stop();
    }
  }, 60_000);

  const broken: [string, string][] = [
    ['no cookie', ''],
    ['a forged token', `basalt_admin=${'A'.repeat(43)}`],
    ['garbage', 'basalt_admin=%%%; other=1'],
    ['an overlong value', `basalt_admin=${'a'.repeat(5000)}`],
    ['another cookie only', 'session=abc'],
  ];
  test.each(broken)('%s → 401 unauthorized (never 500)', async (_n, cookie) => {
    const r = await s.req('GET', '/api/admin/auth/me', { headers: cookie ? { cookie } : {} });
    expectAError(r, 401, 'unauthorized');
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

  test('logout ends the session (the cookie no longer works, the cookie is cleared) and is audited', async () => {
    const a = await signInAdmin(s, { email, create: false });
    const r = await adminReq(s, a, 'POST', '/api/admin/auth/logout');
    expectA(r, 200, {});
    expect(r.headers.get('set-cookie')).toMatch(/^basalt_admin=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0$/);
    expect((await adminReq(s, a, 'GET', '/api/admin/auth/me')).status).toBe(401);
    expect((await auditRows(s, 'auth.logout')).length).toBeGreaterThan(0);
  });

  test('password change: needs the current password; ends the other sessions, keeps this one; the new password signs in', async () => {
    const e = adminEmail('pw');
    await s.platform.services.admin.create(e, ADMIN_PASSWORD, CLI_ACTOR);
    const here = await signInAdmin(s, { email: e, create: false });
    const elsewhere = await signInAdmin(s, { email: e, create: false });
    const bad = await adminReq(s, here, 'POST', '/api/admin/auth/password', {
      current_password: 'nope nope nope',
      new_password: 'new password 5678',
    });
    expectAError(bad, 400, 'validation_error', { details: { fields: { current_password: 'is wrong' } } });
    const short = await adminReq(s, here, 'POST', '/api/admin/auth/password', {
      current_password: ADMIN_PASSWORD,
      new_password: 'short',
    });
    expect(short.status).toBe(400);
    expect(short.body.error.details.fields.new_password).toMatch(/at least/);
    const r = await adminReq(s, here, 'POST', '/api/admin/auth/password', {
      current_password: ADMIN_PASSWORD,
      new_password: 'new password 5678',
    });
    expect(r.status).toBe(200);
    expect(r.body.data.admin.email).toBe(e);
    expect((await adminReq(s, here, 'GET', '/api/admin/auth/me')).status).toBe(200);
    expect((await adminReq(s, elsewhere, 'GET', '/api/admin/auth/me')).status).toBe(401);
    expect((await login(s, e, ADMIN_PASSWORD)).status).toBe(401);
    expect((await login(s, e, 'new password 5678')).status).toBe(200);
    const audit = (await auditRows(s, 'admins.password')).at(-1);
    expect(audit.diff).toMatchObject({ password: '[redacted]', sessions_ended: 1 });
    expect(JSON.stringify(audit)).not.toContain('new password 5678');
  });
});
