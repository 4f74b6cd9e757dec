/**
 * Rate limits and lockout: counters in the database, 429 with Retry-After and
 * error.retry_after, unlock after the window, shared by two instances.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, type Reply, type TestServer } from '../helpers/server';
import { PASSWORD, call, email, ip, startAuthServer, twoInstances } from './support';
import { registerUser } from '../helpers/users';
import { expectAError } from '../helpers/envelopes';

function expectLimited(r: Reply, code: string, maxSeconds: number) {
  expectAError(r, 429, code, { retry_after: expect.any(Number) });
  const after = Number(r.headers.get('retry-after'));
  expect(after).toBe(r.body.error.retry_after);
  expect(after).toBeGreaterThanOrEqual(1);
  expect(after).toBeLessThanOrEqual(maxSeconds);
}

const login = (s: TestServer, address: string, password: string, from: string) =>
  call(s, { path: 'login', body: { email: address, password }, ip: from });

describe.each(ENGINES)('rate limits and lockout on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAuthServer(engine);
  });
  afterAll(() => s.stop());

  test('login: 10 per minute per IP (defaults), the 11th → 429 rate_limited', async () => {
    const from = ip();
    for (let i = 0; i < 10; i++) expect((await login(s, email('nobody'), 'whatever1', from)).status).toBe(401);
    expectLimited(await login(s, email('nobody'), 'whatever1', from), 'rate_limited', 60);
    // Another client is not affected.
    expect((await login(s, email('nobody'), 'whatever1', ip())).status).toBe(401);
  });

  test('login: 5 per minute per (account, IP), the 6th → 429 rate_limited; the account from elsewhere is not', async () => {
    const address = email();
    await registerUser(s, { email: address });
    const from = ip();
    for (let i = 0; i < 5; i++) expect((await login(s, address, PASSWORD, from)).status).toBe(200);
    expectLimited(await login(s, address, PASSWORD, from), 'rate_limited', 60);
    expect((await login(s, address, PASSWORD, ip())).status).toBe(200);
  });

  test('register: 5 per minute per IP, the 6th → 429 rate_limited', async () => {
    const from = ip();
    for (let i = 0; i < 5; i++)
      expect((await call(s, { path: 'register', body: { email: email(), password: PASSWORD }, ip: from })).status).toBe(
        201,
      );
    expectLimited(
      await call(s, { path: 'register', body: { email: email(), password: PASSWORD }, ip: from }),
      'rate_limited',
      60,
    );
  });

  test('password/forgot: 5 per minute per IP, then 429; the answer never depends on the account', async () => {
    const from = ip();
    const known = email();
    await registerUser(s, { email: known });
    const answers = [];
    for (const address of [known, email('ghost'), known, email('ghost'), known]) {
      answers.push(await call(s, { path: 'password/forgot', body: { email: address }, ip: from }));
    }
    expect(new Set(answers.map((r) => JSON.stringify([r.status, r.body]))).size).toBe(1);
    expect(answers[0]!.status).toBe(200);
    expectLimited(await call(s, { path: 'password/forgot', body: { email: known }, ip: from }), 'rate_limited', 60);
  });

  test('lockout: 5 failures from one address lock that address out for 15 minutes, even with the right password; the owner elsewhere still signs in', async () => {
    const address = email();
    await registerUser(s, { email: address });
    const attacker = ip();
    for (let i = 0; i < 5; i++)
      expectAError(await login(s, address, 'wrong password', attacker), 401, 'invalid_credentials');
    const locked = await login(s, address, PASSWORD, attacker);
    expectLimited(locked, 'account_locked', 900);
    expect(locked.body.error.retry_after).toBeGreaterThan(850);
    expect((await login(s, address, PASSWORD, ip())).status).toBe(200);
    // The owner's success does not lift the attacker's lock.
    expectLimited(await login(s, address, PASSWORD, attacker), 'account_locked', 900);
  });

  test('lockout of an unknown address looks exactly like a known one', async () => {
    const ghost = email('ghost');
    const from = ip();
    for (let i = 0; i < 5; i++) await login(s, ghost, 'wrong password', from);
    expectLimited(await login(s, ghost, PASSWORD, from), 'account_locked', 900);
  });

  test('the backstop: failures from many addresses together lock the account for everyone, until a password reset', async () => {
    await s.settings.set('auth.lockout_backstop_threshold', 6);
    try {
      const address = email();
      const id = (await registerUser(s, { email: address })).body.data.user.id;
      for (let i = 0; i < 6; i++) await login(s, address, 'wrong password', ip()); // six addresses, one failure each
      expectLimited(await login(s, address, PASSWORD, ip()), 'account_locked', 900);
      // An operator lifts it (the Users screen's unlock; a password reset does too).
      if (s.target === 'source') await s.platform.services.auth.unlock(address);
      else await s.admin('POST', `/api/admin/users/${id}/unlock`);
      expect((await login(s, address, PASSWORD, ip())).status).toBe(200);
    } finally {
      await s.settings.unset('auth.lockout_backstop_threshold');
    }
  });

  test('lockout ends after the window; a success clears the failures', async () => {
    await s.settings.set('auth.lockout_threshold', 3);
    await s.settings.set('auth.lockout_window_seconds', 2);
    await s.settings.set('auth.rate_limit_login_per_account', 100);
    try {
      const address = email();
      await registerUser(s, { email: address });
      const from = ip();
      for (let i = 0; i < 2; i++) await login(s, address, 'wrong password', from);
      expect((await login(s, address, PASSWORD, from)).status).toBe(200); // clears the two failures
      for (let i = 0; i < 2; i++) await login(s, address, 'wrong password', from);
      expectAError(await login(s, address, 'wrong password', from), 401, 'invalid_credentials'); // third: locks
      expectLimited(await login(s, address, PASSWORD, from), 'account_locked', 2);
      await Bun.sleep(2100);
      expect((await login(s, address, PASSWORD, from)).status).toBe(200);
    } finally {
      await s.settings.set('auth.lockout_threshold', 5);
      await s.settings.set('auth.lockout_window_seconds', 900);
      await s.settings.set('auth.rate_limit_login_per_account', 5);
    }
  });

  test.if(ON_SOURCE)('counters live in the database', async () => {
    const { rows } = await s.platform.db.query<{ n: string }>(
      `SELECT count(*) AS n FROM basalt.auth_rate_limits WHERE bucket LIKE 'login_ip:%'`,
    );
    expect(Number(rows[0]!.n)).toBeGreaterThan(0);
  });
});

describe('limits shared by two instances on one external database', () => {
  const two = twoInstances();

  test.skipIf(!two.external)('10 logins per IP across both instances, then 429 on either', async () => {
    const { a, b } = two;
    const from = ip();
    for (let i = 0; i < 10; i++)
      expect((await login(i % 2 ? b : a, email('nobody'), 'whatever1', from)).status).toBe(401);
    expectLimited(await login(a, email('nobody'), 'whatever1', from), 'rate_limited', 60);
    expectLimited(await login(b, email('nobody'), 'whatever1', from), 'rate_limited', 60);
  });

  test.skipIf(!two.external)('failures on both instances add up to one lockout', async () => {
    const { a, b } = two;
    const address = email();
    await registerUser(a, { email: address });
    const from = ip();
    for (let i = 0; i < 5; i++) await login(i % 2 ? b : a, address, 'wrong password', from);
    expectLimited(await login(b, address, PASSWORD, from), 'account_locked', 900);
    expectLimited(await login(a, address, PASSWORD, from), 'account_locked', 900);
  });

  test.skipIf(!two.external)('a restart forgets nothing: a new instance sees the lock', async () => {
    const { a } = two;
    const address = email();
    await registerUser(a, { email: address });
    const from = ip();
    for (let i = 0; i < 5; i++) await login(a, address, 'wrong password', from);
    const c = await startAuthServer('external', { db: a.db });
    try {
      expectLimited(await login(c, address, PASSWORD, from), 'account_locked', 900);
    } finally {
      await c.stop();
    }
  });
});
