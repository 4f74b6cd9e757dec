/**
 * Two instances on one external PostgreSQL (docs/admin-api.md): an admin session made
 * on one works on the other and ends on both; a key revoked or a user disabled through
 * the admin API of one stops at once on the other. Skipped without external PostgreSQL.
 * Over HTTP: runs against the executable (scripts/test.ts), two of them on one database.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { startAdminServer } from './support';
import { eventually } from '../helpers/wait';
import { signInUser, userEmail } from '../helpers/users';
import { expectAError } from '../helpers/envelopes';

const external = ENGINES.includes('external');

/** NOTIFY reaches the other instance within milliseconds, far below any cache TTL: ask again for up to 2 s. */
const AT_ONCE = { timeout: 2000, interval: 20 };

describe.skipIf(!external)('admin API on two instances sharing a database', () => {
  let a: TestServer;
  let b: TestServer;
  let admin: AdminAuth;
  let sink: SmtpSink;
  beforeAll(async () => {
    sink = await startSmtpSink();
    const env = { BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: 'site@example.com' };
    a = await startAdminServer('external', { env });
    b = await startAdminServer('external', { db: a.db, env });
    admin = await signInAdmin(a);
  }, 60_000);
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await sink?.close();
  });

  test('the session from instance A works on B (same cookie, same CSRF token); both appear on the dashboard', async () => {
    const r = await adminReq(b, admin, 'GET', '/api/admin/auth/me');
    expect(r.status).toBe(200);
    expect(r.body.data.csrf_token).toBe(admin.csrf);
    expect((await adminReq(b, admin, 'POST', '/api/admin/keys', { type: 'public' })).status).toBe(201);
    const dash = await adminReq(b, admin, 'GET', '/api/admin/dashboard');
    expect(dash.body.data.instances.length).toBe(2);
  });

  test('a key revoked through A stops at once on B', async () => {
    const created = await adminReq(a, admin, 'POST', '/api/admin/keys', {
      type: 'service',
      service: 'billing',
      permissions: ['mail:send'],
    });
    const key = created.body.data.secret as string;
    const send = () =>
      b.req('POST', '/api/v1/mail/send', {
        headers: { 'x-api-key': key },
        body: { to: ['x@example.com'], subject: 's', text: 't' },
      });
    expect((await send()).status).toBe(202);
    expect((await adminReq(a, admin, 'POST', `/api/admin/keys/${created.body.data.key.id}/revoke`)).status).toBe(200);
    expect(
      (await eventually(send, { ...AT_ONCE, until: (r) => r.status === 401, what: 'B to refuse the revoked key' }))
        .status,
    ).toBe(401);
  });

  test('a user disabled through A: their access token stops at once on B, and they cannot sign in there', async () => {
    const u = await signInUser(b, { email: userEmail('site') });
    const me = () => b.req('GET', '/api/v1/auth/me', { headers: u.headers() });
    expect((await me()).status).toBe(200);
    expect((await adminReq(a, admin, 'POST', `/api/admin/users/${u.user.id}/disable`)).status).toBe(200);
    const after = await eventually(me, {
      ...AT_ONCE,
      until: (r) => r.status !== 200,
      what: "B to refuse the disabled user's token",
    });
    expect(after.status).toBeGreaterThanOrEqual(401);
    expect(after.status).toBeLessThanOrEqual(403);
    const login = await b.req('POST', '/api/v1/auth/login', { body: { email: u.email, password: u.password } });
    expectAError(login, 403, 'account_disabled');
  });

  test('a setting changed through A is live on B', async () => {
    expect((await adminReq(a, admin, 'PUT', '/api/admin/settings/app.name', { value: 'Shared' })).status).toBe(200);
    const onB = async () => (await b.req('GET', '/api/v1/public/runtime-config')).body.data.app_name;
    await eventually(onB, {
      timeout: 3000,
      interval: 20,
      until: (v) => v === 'Shared',
      what: 'the setting on B',
    });
    expect(await onB()).toBe('Shared');
  });

  test('logout on B ends the session on A at once; a password change on A ends the other sessions on B', async () => {
    const s1 = await signInAdmin(a, { email: admin.email, create: false });
    expect((await adminReq(b, s1, 'POST', '/api/admin/auth/logout')).status).toBe(200);
    expect((await adminReq(a, s1, 'GET', '/api/admin/auth/me')).status).toBe(401);
    const other = await signInAdmin(b, { email: admin.email, create: false });
    const r = await adminReq(a, admin, 'POST', '/api/admin/auth/password', {
      current_password: admin.password,
      new_password: 'another password 99',
    });
    expect(r.status).toBe(200);
    expect((await adminReq(b, other, 'GET', '/api/admin/auth/me')).status).toBe(401);
    expect((await adminReq(b, admin, 'GET', '/api/admin/auth/me')).status).toBe(200);
  });
});
