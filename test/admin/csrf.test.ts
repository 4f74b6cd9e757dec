/**
 * CSRF layers on every state-changing admin request (docs/admin-api.md §Sessions and
 * CSRF): Fetch Metadata / Origin first (sign-in and setup included), then the
 * session's X-CSRF-Token. Reads pass without either. Over HTTP only: runs against the
 * executable (scripts/test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { ADMIN_PASSWORD, adminReq, createAdmin, signInAdmin, type AdminAuth } from '../helpers/admin';
import { adminEmail, ip, startAdminServer } from './support';
import { expectAError } from '../helpers/envelopes';

describe.each(ENGINES)('admin CSRF on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  let host: string;
  beforeAll(async () => {
    s = await startAdminServer(engine);
    a = await signInAdmin(s);
    host = new URL(s.url).host;
  }, 60_000);
  afterAll(() => s.stop());

  const keyBody = { type: 'public' };
  // [name, headers beyond the session cookie, expected status]
  const withSession: [string, (a: AdminAuth) => Record<string, string>, number][] = [
    ['same-origin with the token', (a) => ({ 'sec-fetch-site': 'same-origin', 'x-csrf-token': a.csrf }), 201],
    [
      'Sec-Fetch-Site none (typed URL, bookmark) with the token',
      (a) => ({ 'sec-fetch-site': 'none', 'x-csrf-token': a.csrf }),
      201,
    ],
    ['no Fetch Metadata and no Origin (not a browser) with the token', (a) => ({ 'x-csrf-token': a.csrf }), 201],
    [
      'no Fetch Metadata, own Origin, with the token',
      (a) => ({ origin: `http://${host}`, 'x-csrf-token': a.csrf }),
      201,
    ],
    ['cross-site Sec-Fetch-Site', (a) => ({ 'sec-fetch-site': 'cross-site', 'x-csrf-token': a.csrf }), 403],
    [
      'same-site (a sibling subdomain) Sec-Fetch-Site',
      (a) => ({ 'sec-fetch-site': 'same-site', 'x-csrf-token': a.csrf }),
      403,
    ],
    ['no Fetch Metadata, foreign Origin', (a) => ({ origin: 'https://evil.example', 'x-csrf-token': a.csrf }), 403],
    ['no Fetch Metadata, Origin null', (a) => ({ origin: 'null', 'x-csrf-token': a.csrf }), 403],
    ['same-origin without the token', () => ({ 'sec-fetch-site': 'same-origin' }), 403],
    [
      'same-origin with a wrong token',
      () => ({ 'sec-fetch-site': 'same-origin', 'x-csrf-token': 'A'.repeat(43) }),
      403,
    ],
    [
      'same-origin with a token of another length',
      () => ({ 'sec-fetch-site': 'same-origin', 'x-csrf-token': 'short' }),
      403,
    ],
  ];
  const keyCount = async () => (await adminReq(s, a, 'GET', '/api/admin/keys')).body.data.keys.length as number;
  test.each(withSession)('POST /api/admin/keys, %s', async (_n, headers, status) => {
    const before = await keyCount();
    const r = await s.req('POST', '/api/admin/keys', { body: keyBody, headers: { cookie: a.cookie, ...headers(a) } });
    expect(r.status).toBe(status);
    if (status === 403) {
      expectAError(r, 403, 'csrf_failed');
      expect(await keyCount()).toBe(before);
    }
  });

  test("another session's token does not pass", async () => {
    const b = await signInAdmin(s);
    const r = await s.req('POST', '/api/admin/keys', {
      body: keyBody,
      headers: { cookie: a.cookie, 'sec-fetch-site': 'same-origin', 'x-csrf-token': b.csrf },
    });
    expect(r.status).toBe(403);
  });

  const signIn: [string, Record<string, string>, number][] = [
    ['same-origin', { 'sec-fetch-site': 'same-origin' }, 200],
    ['cross-site', { 'sec-fetch-site': 'cross-site' }, 403],
    ['foreign Origin without Fetch Metadata', { origin: 'https://evil.example' }, 403],
  ];
  test.each(signIn)('sign-in, %s: only layer 1 (login needs no token)', async (_n, headers, status) => {
    const email = adminEmail();
    await createAdmin(s, email, ADMIN_PASSWORD);
    const r = await s.req('POST', '/api/admin/auth/login', {
      body: { email, password: ADMIN_PASSWORD },
      headers: { 'x-forwarded-for': ip(), ...headers },
    });
    expect(r.status).toBe(status);
    if (status === 403) {
      expectAError(r, 403, 'csrf_failed');
      expect(r.headers.get('set-cookie')).toBeNull();
    }
  });

  test('setup from another site → 403 before the token is even looked at', async () => {
    const r = await s.req('POST', '/api/admin/auth/setup', {
      body: { token: 'x'.repeat(43), email: adminEmail(), password: ADMIN_PASSWORD },
      headers: { 'sec-fetch-site': 'cross-site' },
    });
    expectAError(r, 403, 'csrf_failed');
  });

  test('a cross-site logout does not end the session', async () => {
    const r = await s.req('POST', '/api/admin/auth/logout', {
      headers: { cookie: a.cookie, 'sec-fetch-site': 'cross-site', 'x-csrf-token': a.csrf },
    });
    expect(r.status).toBe(403);
    expect((await s.req('GET', '/api/admin/auth/me', { headers: { cookie: a.cookie } })).status).toBe(200);
  });

  test('reads pass without the token and even cross-site (they change nothing; SameSite=Strict keeps the cookie home)', async () => {
    const r = await s.req('GET', '/api/admin/keys', { headers: { cookie: a.cookie, 'sec-fetch-site': 'cross-site' } });
    expect(r.status).toBe(200);
  });

  test('a state-changing request with no session and a cross-site origin → 403 first; same-origin without a session → 401', async () => {
    expect(
      (await s.req('POST', '/api/admin/keys', { body: keyBody, headers: { 'sec-fetch-site': 'cross-site' } })).status,
    ).toBe(403);
    expect(
      (await s.req('POST', '/api/admin/keys', { body: keyBody, headers: { 'sec-fetch-site': 'same-origin' } })).status,
    ).toBe(401);
  });
});
