/**
 * What the Users screen's actions do to a site user (docs/admin-api.md §Users): the
 * effect is immediate on the user's tokens and sign-in, not only a changed row.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { ip, startAdminServer } from './support';
import { USER_PASSWORD, registerUser, signInUser } from '../helpers/users';
import { expectAError } from '../helpers/envelopes';

describe.each(ENGINES)('admin actions on site users on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  const me = (token: string) => s.req('GET', '/api/v1/auth/me', { headers: { authorization: `Bearer ${token}` } });
  const login = (email: string) =>
    s.req('POST', '/api/v1/auth/login', {
      body: { email, password: USER_PASSWORD },
      headers: { 'x-forwarded-for': ip() },
    });
  beforeAll(async () => {
    s = await startAdminServer(engine, { env: { BASALT_AUTH_LOCKOUT_THRESHOLD: '2' } });
    a = await signInAdmin(s);
  }, 60_000);
  afterAll(() => s.stop());

  test('disable: the access token stops at once (403 account_disabled), sign-in refused; enable: sign-in works again', async () => {
    const u = await signInUser(s);
    expect((await me(u.access_token)).status).toBe(200);
    expect((await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/disable`)).status).toBe(200);
    expect((await me(u.access_token)).status).toBeGreaterThanOrEqual(401);
    expectAError(await login(u.email), 403, 'account_disabled');
    const enabled = await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/enable`);
    expect(enabled.body.data.user.disabled_at).toBeNull();
    expect((await login(u.email)).status).toBe(200);
  });

  test('end sessions: every token of the user stops; the user can sign in again', async () => {
    const u = await signInUser(s);
    expect((await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/end-sessions`)).status).toBe(200);
    expect((await me(u.access_token)).status).toBe(401);
    expect((await s.req('POST', '/api/v1/auth/refresh', { body: { refresh_token: u.refresh_token } })).status).toBe(
      401,
    );
    expect((await login(u.email)).status).toBe(200);
  });

  test('unlock: a locked account signs in again at once', async () => {
    const u = await signInUser(s);
    for (let i = 0; i < 2; i++)
      await s.req('POST', '/api/v1/auth/login', {
        body: { email: u.email, password: 'wrong wrong wrong' },
        headers: { 'x-forwarded-for': ip() },
      });
    expectAError(await login(u.email), 429, 'account_locked');
    const detail = await adminReq(s, a, 'GET', `/api/admin/users/${u.user.id}`);
    expect(detail.body.data.user.locked_until).toEqual(expect.any(String));
    const r = await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/unlock`);
    expect(r.body.data.user.locked_until).toBeNull();
    expect((await login(u.email)).status).toBe(200);
  });

  test('delete: the user and their sessions are gone; their token stops; the address can register again', async () => {
    const u = await signInUser(s);
    expect((await adminReq(s, a, 'DELETE', `/api/admin/users/${u.user.id}`)).status).toBe(200);
    expect((await me(u.access_token)).status).toBe(401);
    expect((await adminReq(s, a, 'GET', `/api/admin/users/${u.user.id}`)).status).toBe(404);
    await registerUser(s, { email: u.email });
  });

  test('resend verification without mail configured → 503 mail_not_configured, nothing audited', async () => {
    const u = await signInUser(s);
    const before = (
      await s.platform.db.query(
        `SELECT count(*)::int AS n FROM basalt.admin_audit WHERE action = 'users.resend-verification'`,
      )
    ).rows[0] as any;
    const r = await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/resend-verification`);
    expectAError(r, 503, 'mail_not_configured');
    const after = (
      await s.platform.db.query(
        `SELECT count(*)::int AS n FROM basalt.admin_audit WHERE action = 'users.resend-verification'`,
      )
    ).rows[0] as any;
    expect(after.n).toBe(before.n);
  });

  test('resend verification with mail but no web.public_base_url → 409 naming the setting (a link to the panel would be wrong)', async () => {
    const u = await signInUser(s);
    await s.platform.settings.set('mail.smtp_url', 'smtp://127.0.0.1:9');
    await s.platform.settings.set('mail.from', 'site@example.com');
    try {
      const r = await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/resend-verification`);
      expectAError(r, 409, 'invalid_state');
      expect(r.body.error.message).toContain('web.public_base_url');
    } finally {
      await s.platform.settings.unset('mail.smtp_url');
      await s.platform.settings.unset('mail.from');
    }
  });

  test('search is by a part of the e-mail, case-insensitive, with LIKE characters taken literally', async () => {
    const u = await signInUser(s);
    const part = u.email.split('@')[0]!.toUpperCase();
    const r = await adminReq(s, a, 'GET', `/api/admin/users?search=${encodeURIComponent(part)}`);
    expect(r.body.data.users.map((x: any) => x.id)).toEqual([u.user.id]);
    expect((await adminReq(s, a, 'GET', '/api/admin/users?search=%25')).body.data.total).toBe(0);
    expect((await adminReq(s, a, 'GET', '/api/admin/users?limit=0')).status).toBe(400);
  });
});
