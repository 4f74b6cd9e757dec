/**
 * Administrator lockout an outsider cannot turn against the administrator (docs/admin.md,
 * "Sign-in and lockout"): failures count per (account, address); only a backstop across
 * many addresses locks the account for everyone; `admin unlock` and `admin passwd` lift
 * a lock at once; the admin API shows the lock and the addresses trying. Before, five wrong
 * passwords from anywhere locked `ops@…` for everyone, and `admin passwd` left the lock.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { ADMIN_PASSWORD, adminReq, createAdmin, executableCli, signInAdmin, type AdminAuth } from '../helpers/admin';
import { CLI_ACTOR } from '../../src/modules/admin/audit';
import { adminEmail, auditRows, ip, login, startAdminServer } from '../admin/support';
import { expectAError } from '../helpers/envelopes';

const PER_SOURCE = 3;
const BACKSTOP = 7;

describe.each(ENGINES)('administrator lockout on %s', (engine) => {
  let s: TestServer;
  let viewer: AdminAuth;
  beforeAll(async () => {
    s = await startAdminServer(engine, {
      env: {
        BASALT_AUTH_LOCKOUT_THRESHOLD: String(PER_SOURCE),
        BASALT_ADMIN_LOCKOUT_BACKSTOP_THRESHOLD: String(BACKSTOP),
        // The per-address limits must not be what answers here (the per-account one is a stored setting: one test lowers it).
        BASALT_AUTH_RATE_LIMIT_LOGIN_PER_IP: '1000',
      },
    });
    await s.settings.set('auth.rate_limit_login_per_account', 1000);
    viewer = await signInAdmin(s);
  }, 180_000);
  afterAll(() => s.stop());

  const fail = (email: string, from: string, times: number) =>
    Promise.all(Array.from({ length: times }, () => login(s, email, 'wrong password 123', from)));
  const adminOf = async (email: string) =>
    ((await adminReq(s, viewer, 'GET', '/api/admin/admins')).body.data.admins as any[]).find((a) => a.email === email);
  const lockOf = async (email: string) => (await adminOf(email)).lock;
  /** `basalt admin unlock EMAIL`: the service it runs, in process; or the executable's own command line. Counters cleared. */
  const cliUnlock = async (email: string): Promise<number> => {
    if (s.target === 'source') return (await s.platform.services.admin.unlock(email, CLI_ACTOR)).cleared;
    const r = await executableCli(s, ['admin', 'unlock', email]);
    expect(r.code).toBe(0);
    return Number(/\((\d+) failure counters? cleared\)/.exec(r.stdout)?.[1]);
  };
  /** `basalt admin passwd`, the same two ways. */
  const cliPasswd = async (email: string, password: string): Promise<void> => {
    if (s.target === 'source') await s.platform.services.admin.setPassword(email, password, CLI_ACTOR);
    else expect((await executableCli(s, ['admin', 'passwd', '--email', email, '--password', password])).code).toBe(0);
  };

  test("an outsider's wrong passwords lock out only the outsider's address", async () => {
    const ops = adminEmail('ops');
    await createAdmin(s, ops);
    const outsider = ip();
    for (const r of await fail(ops, outsider, PER_SOURCE)) expect(r.status).toBe(401);
    // The outsider is locked out, even with the right password…
    const locked = await login(s, ops, ADMIN_PASSWORD, outsider);
    expectAError(locked, 429, 'account_locked', { retry_after: expect.any(Number) });
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    // …and the administrator, elsewhere, signs in.
    expect((await login(s, ops, ADMIN_PASSWORD, ip())).status).toBe(200);
    // The admin API shows who is trying, and that the account itself is not locked.
    const lock = await lockOf(ops);
    expect(lock.locked_until).toBeNull();
    expect(lock.sources).toEqual([
      { ip: outsider, failures: 0, window_start: expect.any(String), locked_until: expect.any(String) },
    ]);
  });

  test('the backstop: failures from many addresses lock the account for everyone; admin unlock lifts it (audited as the CLI)', async () => {
    const ops = adminEmail('ops');
    await createAdmin(s, ops);
    const sources = [ip(), ip(), ip()];
    for (const from of sources) await fail(ops, from, PER_SOURCE - 1);
    // 6 failures from 3 addresses: under the backstop (7), nobody is locked.
    expect((await login(s, ops, ADMIN_PASSWORD, ip())).status).toBe(200);
    await fail(ops, ip(), 1);
    const r = await login(s, ops, ADMIN_PASSWORD, ip());
    expectAError(r, 429, 'account_locked');
    const lock = await lockOf(ops);
    expect(lock.locked_until).toEqual(expect.any(String));
    expect(lock.sources.map((x: any) => x.ip).sort()).toEqual(expect.arrayContaining(sources.sort()));

    const audited = (await auditRows(s, 'admins.unlock')).length;
    expect(await cliUnlock(ops.toUpperCase())).toBeGreaterThan(0);
    expect((await login(s, ops, ADMIN_PASSWORD, ip())).status).toBe(200);
    expect((await lockOf(ops)).sources).toEqual([]);
    const rows = await auditRows(s, 'admins.unlock');
    expect(rows.length).toBe(audited + 1);
    expect(rows.at(-1)).toMatchObject({ user_agent: 'basalt cli', admin_id: null, target: (await adminOf(ops)).id });
  });

  test('admin passwd lifts every lock of the account (before: 429 with 896 s left)', async () => {
    const ops = adminEmail('ops');
    await createAdmin(s, ops);
    const mine = ip();
    await fail(ops, mine, PER_SOURCE);
    for (let i = 0; i < 3; i++) await fail(ops, ip(), PER_SOURCE - 1);
    expectAError(await login(s, ops, ADMIN_PASSWORD, mine), 429, 'account_locked');
    await cliPasswd(ops, 'a brand new password');
    expect((await login(s, ops, 'a brand new password', mine)).status).toBe(200);
  });

  test('the panel can lift a lock too: POST /api/admin/admins/unlock, audited with the administrator', async () => {
    const ops = adminEmail('ops');
    await createAdmin(s, ops);
    const from = ip();
    await fail(ops, from, PER_SOURCE);
    expectAError(await login(s, ops, ADMIN_PASSWORD, from), 429, 'account_locked');
    const r = await adminReq(s, viewer, 'POST', '/api/admin/admins/unlock', { email: ops });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ admin: { email: ops }, cleared: 2 });
    expect((await login(s, ops, ADMIN_PASSWORD, from)).status).toBe(200);
    expect((await auditRows(s, 'admins.unlock')).at(-1)).toMatchObject({ admin_id: viewer.admin.id });
    expectAError(
      await adminReq(s, viewer, 'POST', '/api/admin/admins/unlock', { email: adminEmail('nobody') }),
      404,
      'not_found',
    );
  });

  test('an e-mail cannot reach into another account’s counters', async () => {
    const ops = adminEmail('ops');
    await createAdmin(s, ops);
    // An address shaped like the per-source key's prefix counts as its own, unknown account.
    await fail(`${ops}","1.2.3.4`, ip(), PER_SOURCE);
    expect((await lockOf(ops)).sources).toEqual([]);
  });

  test('admin unlock and admin passwd also clear the sign-in limit of the account (before: 429 rate_limited for a minute)', async () => {
    // The account's limit per address is reached by the failures that lock it.
    await s.settings.set('auth.rate_limit_login_per_account', PER_SOURCE);
    try {
      for (const lift of [(e: string) => cliUnlock(e), (e: string) => cliPasswd(e, ADMIN_PASSWORD)]) {
        const ops = adminEmail('ops');
        await createAdmin(s, ops);
        const mine = ip();
        for (const r of await fail(ops, mine, PER_SOURCE)) expect(r.status).toBe(401);
        expectAError(await login(s, ops, ADMIN_PASSWORD, mine), 429, 'account_locked');
        await lift(ops);
        expect((await login(s, ops, ADMIN_PASSWORD, mine)).status).toBe(200);
      }
    } finally {
      await s.settings.set('auth.rate_limit_login_per_account', 1000);
    }
  });
});
