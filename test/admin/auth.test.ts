/**
 * Administrators signing in (docs/admin-api.md §Sessions and CSRF, docs/admin.md):
 * sign-in hardening, the cookie, logout and password change. Over HTTP: runs against the
 * executable (scripts/test.ts). The setup link, what is stored and the session lifetimes
 * need the database in this process: auth-sessions.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { ADMIN_PASSWORD, adminReq, createAdmin, signInAdmin } from '../helpers/admin';
import { adminEmail, auditRows, ip, login, startAdminServer } from './support';
import { expectA, expectAError } from '../helpers/envelopes';

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
    await createAdmin(s, email);
  }, 60_000);
  afterAll(() => s.stop());

  test('right password: 200 {admin, csrf_token}, a session cookie, audited', async () => {
    await auditRows(s, 'auth.login'); // on the executable, its control administrator signs in here, first
    const r = await login(s, email, ADMIN_PASSWORD);
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({
      admin: { id: expect.any(String), email, created_at: expect.any(String), last_login_at: expect.any(String) },
      csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    expect(r.headers.get('set-cookie')).toMatch(/^basalt_admin=[A-Za-z0-9_-]{43}; /);
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
    // The administrators are made first: on the executable that is a command-line process,
    // whose work would otherwise overlap the timed sign-in that follows it.
    const knownAdmins = [adminEmail('known'), adminEmail('known'), adminEmail('known')];
    for (const e of knownAdmins) await createAdmin(s, e);
    await time(adminEmail('warm'));
    const unknown: number[] = [];
    const known: number[] = [];
    for (const e of knownAdmins) {
      unknown.push(await time(adminEmail('nobody')));
      known.push(await time(e));
    }
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    // Both run one argon2id verify; without the dummy hash an unknown address would answer in ~1 ms.
    expect(median(unknown)).toBeGreaterThan(median(known) * 0.4);
  });

  test('lockout: failures up to auth.lockout_threshold lock the account for that address (429 account_locked with Retry-After), even with the right password', async () => {
    const e = adminEmail('locked');
    const from = ip();
    await createAdmin(s, e);
    for (let i = 0; i < 3; i++) expect((await login(s, e, 'wrong password 123', from)).status).toBe(401);
    const r = await login(s, e, ADMIN_PASSWORD, from);
    expectAError(r, 429, 'account_locked', { retry_after: expect.any(Number) });
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    // Counted in the database, apart from site users' counters: auth-sessions.test.ts.
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
    await createAdmin(s, email);
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
      await createAdmin(t, e);
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
    await createAdmin(s, e);
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
