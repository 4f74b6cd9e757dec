/**
 * What the Users screen's actions do to a site user (docs/admin-api.md §Users): the
 * effect is immediate on the user's tokens and sign-in, not only a changed row. Over HTTP
 * only: runs against the executable (scripts/test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { auditRows, ip, startAdminServer } from './support';
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
    s = await startAdminServer(engine, {
      env: { BASALT_AUTH_LOCKOUT_THRESHOLD: '2', BASALT_AUTH_LOCKOUT_BACKSTOP_THRESHOLD: '3' },
    });
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
    const wrong = (from: string) =>
      s.req('POST', '/api/v1/auth/login', {
        body: { email: u.email, password: 'wrong wrong wrong' },
        headers: { 'x-forwarded-for': from },
      });
    // Two failures from one address lock that address out only: the detail names it.
    const outsider = ip();
    for (let i = 0; i < 2; i++) await wrong(outsider);
    expect((await login(u.email)).status).toBe(200);
    const one = await adminReq(s, a, 'GET', `/api/admin/users/${u.user.id}`);
    expect(one.body.data.user.locked_until).toBeNull();
    expect(one.body.data.lock.sources).toEqual([
      expect.objectContaining({ ip: outsider, locked_until: expect.any(String) }),
    ]);
    // The backstop (3 failures from any addresses) locks the account for everyone.
    await wrong(ip());
    expectAError(await login(u.email), 429, 'account_locked');
    const detail = await adminReq(s, a, 'GET', `/api/admin/users/${u.user.id}`);
    expect(detail.body.data.user.locked_until).toEqual(expect.any(String));
    const r = await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/unlock`);
    expect(r.body.data.user.locked_until).toBeNull();
    expect((await login(u.email)).status).toBe(200);
    expect((await adminReq(s, a, 'GET', `/api/admin/users/${u.user.id}`)).body.data.lock.sources).toEqual([]);
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
    const before = (await auditRows(s, 'users.resend-verification', a)).length;
    const r = await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/resend-verification`);
    expectAError(r, 503, 'mail_not_configured');
    expect((await auditRows(s, 'users.resend-verification', a)).length).toBe(before);
  });

  test('resend verification with mail but no web.public_base_url → 409 naming the setting (a link to the panel would be wrong)', async () => {
    const u = await signInUser(s);
    const setting = async (key: string, value?: string) =>
      expect(
        (
          await adminReq(
            s,
            a,
            value === undefined ? 'DELETE' : 'PUT',
            `/api/admin/settings/${key}`,
            value === undefined ? undefined : { value },
          )
        ).status,
      ).toBe(200);
    await setting('mail.smtp_url', 'smtp://127.0.0.1:9');
    await setting('mail.from', 'site@example.com');
    try {
      const r = await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/resend-verification`);
      expectAError(r, 409, 'invalid_state');
      expect(r.body.error.message).toContain('web.public_base_url');
    } finally {
      await setting('mail.smtp_url');
      await setting('mail.from');
    }
  });

  const audited = async (action: string, target: string) =>
    (await auditRows(s, action, a)).filter((r) => r.target === target).at(-1) as
      | { diff: any; target_label: string }
      | undefined;

  test('create: every wrong field named at once; the user signs in; verified when asked; a taken address → 409', async () => {
    const bad = await adminReq(s, a, 'POST', '/api/admin/users', { email: 'not an address', password: 'short' });
    expectAError(bad, 400, 'validation_error');
    expect(Object.keys(bad.body.error.details.fields).sort()).toEqual(['email', 'password']);
    expect(
      Object.keys((await adminReq(s, a, 'POST', '/api/admin/users', {})).body.error.details.fields).sort(),
    ).toEqual(['email', 'password']);
    const email = `made-${crypto.randomUUID().slice(0, 8)}@Example.com`;
    const r = await adminReq(s, a, 'POST', '/api/admin/users', { email, password: USER_PASSWORD, verified: true });
    expect(r.status).toBe(201);
    expect(r.body.data.user).toMatchObject({ email: email.toLowerCase(), email_verified_at: expect.any(String) });
    expect((await login(email.toLowerCase())).status).toBe(200);
    expect(await audited('users.create', r.body.data.user.id)).toMatchObject({
      target_label: email.toLowerCase(),
      diff: { email: email.toLowerCase(), verified: true },
    });
    expectAError(await adminReq(s, a, 'POST', '/api/admin/users', { email, password: USER_PASSWORD }), 409, 'conflict');
  });

  test('set password: the old one stops, the new one signs in, every session ends; the audit never holds it', async () => {
    const u = await signInUser(s);
    expectAError(
      await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/password`, { password: 'short' }),
      400,
      'validation_error',
    );
    const next = 'a new password for them 9';
    expect((await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/password`, { password: next })).status).toBe(
      200,
    );
    expect((await me(u.access_token)).status).toBe(401);
    expect((await login(u.email)).status).toBe(401);
    const ok = await s.req('POST', '/api/v1/auth/login', {
      body: { email: u.email, password: next },
      headers: { 'x-forwarded-for': ip() },
    });
    expect(ok.status).toBe(200);
    const row = await audited('users.password', u.user.id);
    expect(JSON.stringify(row)).not.toContain(next);
    expect(row!.target_label).toBe(u.email);
  });

  test('mark verified, and change the e-mail (old → new in the audit; the new address unverified, taken → 409)', async () => {
    const u = await signInUser(s);
    const v = await adminReq(s, a, 'POST', `/api/admin/users/${u.user.id}/verify`);
    expect(v.body.data.user.email_verified_at).toEqual(expect.any(String));
    expect((await me(u.access_token)).body.data.user.email_verified).toBe(true);
    const other = await signInUser(s);
    expectAError(
      await adminReq(s, a, 'PATCH', `/api/admin/users/${u.user.id}`, { email: other.email }),
      409,
      'conflict',
    );
    expectAError(
      await adminReq(s, a, 'PATCH', `/api/admin/users/${u.user.id}`, { email: 'nope' }),
      400,
      'validation_error',
    );
    const next = `moved-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const r = await adminReq(s, a, 'PATCH', `/api/admin/users/${u.user.id}`, { email: next });
    expect(r.body.data.user).toMatchObject({ email: next, email_verified_at: null });
    expect((await login(next)).status).toBe(200);
    expect(await audited('users.email', u.user.id)).toMatchObject({
      target_label: next,
      diff: { email: { before: u.email, after: next } },
    });
    // The entry is found by either address.
    const found = await adminReq(s, a, 'GET', `/api/admin/audit?target=${encodeURIComponent(next)}`);
    expect(found.body.data.entries.map((e: any) => e.action)).toContain('users.email');
  });

  test('the detail says why a verification mail cannot go out (mail, then the link)', async () => {
    const u = await signInUser(s);
    const d = await adminReq(s, a, 'GET', `/api/admin/users/${u.user.id}`);
    expect(d.body.data.verification_mail).toContain('mail.smtp_url');
  });

  test('search is by a part of the e-mail, case-insensitive, with LIKE characters taken literally', async () => {
    const u = await signInUser(s);
    const part = u.email.split('@')[0]!.toUpperCase();
    const r = await adminReq(s, a, 'GET', `/api/admin/users?search=${encodeURIComponent(part)}`);
    expect(r.body.data.users.map((x: any) => x.id)).toEqual([u.user.id]);
    expect((await adminReq(s, a, 'GET', '/api/admin/users?search=%25')).body.data.total).toBe(0);
    // Domains are stored in their xn-- form; a whole Unicode label finds them.
    const label = `bücher-${Date.now()}`;
    const idn = await signInUser(s, { email: `idn@${label}.example` });
    expect(idn.user.email).toContain('@xn--');
    const found = await adminReq(s, a, 'GET', `/api/admin/users?search=${encodeURIComponent(`${label}.EXAMPLE`)}`);
    expect(found.body.data.users.map((x: any) => x.id)).toContain(idn.user.id);
    expect((await adminReq(s, a, 'GET', '/api/admin/users?limit=0')).status).toBe(400);
  });
});
