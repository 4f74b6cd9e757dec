/**
 * Audit fixes: mailed-token routes refuse dead tokens before hashing and are limited
 * per IP; the access-mode key and the Bearer token are checked before the body;
 * X-Forwarded-For from an untrusted peer changes nothing; logout needs live
 * credentials; the password policy setting and lockout apply through HTTP;
 * password change/reset end sessions on another instance at once. Reset tokens come by mail
 * (password/forgot to an SMTP sink), as their owners get them. How many passwords were hashed
 * is counted in process: those checks run on the source only (`ON_SOURCE`); rows are read
 * beside the server (`s.sql`) where `canSql`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { canSql, ON_SOURCE, type Reply, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { hashesMade } from '../../src/modules/auth/passwords';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { PASSWORD, call, email, ip, mailEnv, resetToken, startAuthServer, twoInstances } from './support';
import { signInUser } from '../helpers/users';
import { eventually } from '../helpers/wait';
import { expectAError } from '../helpers/envelopes';

const me = (s: TestServer, token: string) => call(s, { method: 'GET', path: 'me', token });
const garbage = () => 'AAAAAAAAAAAAAAAA.' + crypto.randomUUID().replaceAll('-', '').padEnd(43, 'x');

function expectLimited(r: Reply) {
  expectAError(r, 429, 'rate_limited', { retry_after: expect.any(Number) });
  expect(Number(r.headers.get('retry-after'))).toBe(r.body.error.retry_after);
}

/** Password hashes this process has made (the source), or undefined: the executable's count is not visible. */
const hashes = (): number | undefined => (ON_SOURCE ? hashesMade() : undefined);

/** On the source: exactly `n` password hashes were made since `before` (hashes()). */
function expectHashedSince(before: number | undefined, n: number): void {
  if (before !== undefined) expect(hashesMade()).toBe(before + n);
}

/** `me` on an instance, asked again until it stops answering 200 (NOTIFY arrives in milliseconds: 2 s at most). */
function meUntilRefused(s: TestServer, token: string): Promise<Reply> {
  return eventually(() => me(s, token), {
    timeout: 2000,
    interval: 20,
    until: (r) => r.status !== 200,
    what: 'the token to be refused',
  });
}

describe.each(ENGINES)('hardening on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  beforeAll(async () => {
    sink = await startSmtpSink();
    s = await startAuthServer(engine, { env: mailEnv(sink) });
  });
  afterAll(async () => {
    await s.stop();
    await sink.close();
  });

  describe('password/reset and verify-email', () => {
    test('a dead token is refused before any hashing; a live one pays for exactly one hash', async () => {
      const u = await signInUser(s);
      const token = await resetToken(s, sink, u);
      const before = hashes();
      for (const token of [garbage(), u.refresh_token, 'not-a-token']) {
        const r = await call(s, { path: 'password/reset', body: { token, password: 'a brand new secret' } });
        expectAError(r, 400, 'invalid_token');
      }
      expectHashedSince(before, 0);
      expect((await call(s, { path: 'password/reset', body: { token, password: 'a brand new secret' } })).status).toBe(
        200,
      );
      expectHashedSince(before, 1);
      // Spent: refused, and no hash for the second try.
      expectAError(
        await call(s, { path: 'password/reset', body: { token, password: 'yet another secret' } }),
        400,
        'invalid_token',
      );
      expectHashedSince(before, 1);
      expect((await call(s, { path: 'login', body: { email: u.email, password: 'a brand new secret' } })).status).toBe(
        200,
      );
    });

    test('the policy is checked before the token: a short password never spends it', async () => {
      const u = await signInUser(s);
      const token = await resetToken(s, sink, u);
      const short = await call(s, { path: 'password/reset', body: { token, password: 'short' } });
      expect([short.status, short.body.error.details]).toEqual([
        422,
        { fields: { password: 'must be at least 8 characters' } },
      ]);
      expect((await call(s, { path: 'password/reset', body: { token, password: 'long enough now' } })).status).toBe(
        200,
      );
    });

    test("two resets racing with one token: exactly one wins, the password is the winner's", async () => {
      const u = await signInUser(s);
      const token = await resetToken(s, sink, u);
      const passwords = ['first racing secret', 'second racing secret'];
      const both = await Promise.all(
        passwords.map((password) => call(s, { path: 'password/reset', body: { token, password } })),
      );
      expect(both.map((r) => r.status).sort()).toEqual([200, 400]);
      const winner = passwords[both.findIndex((r) => r.status === 200)]!;
      const loser = passwords.find((p) => p !== winner)!;
      expect((await call(s, { path: 'login', body: { email: u.email, password: winner } })).status).toBe(200);
      expect((await call(s, { path: 'login', body: { email: u.email, password: loser } })).status).toBe(401);
    });

    test('10 token submissions per minute per IP (reset and verify-email together), then 429 with Retry-After', async () => {
      const from = ip();
      const u = await signInUser(s);
      const live = await resetToken(s, sink, u);
      const before = hashes();
      for (let i = 0; i < 10; i++) {
        const path = i % 2 ? 'verify-email' : 'password/reset';
        const r = await call(s, { path, body: { token: garbage(), password: 'a brand new secret' }, ip: from });
        expect(r.status).toBe(400);
      }
      const limited = await call(s, {
        path: 'password/reset',
        body: { token: garbage(), password: 'a brand new secret' },
        ip: from,
      });
      expectLimited(limited);
      expect(limited.body.error.retry_after).toBeLessThanOrEqual(60);
      expectLimited(await call(s, { path: 'verify-email', body: { token: garbage() }, ip: from }));
      // Even a live token waits: the limit comes first.
      expectLimited(
        await call(s, {
          path: 'password/reset',
          body: { token: live, password: 'a brand new secret' },
          ip: from,
        }),
      );
      expectHashedSince(before, 0);
      // Another client is not affected; the counter is a database row.
      expect((await call(s, { path: 'verify-email', body: { token: garbage() } })).status).toBe(400);
      if (canSql(engine))
        expect(await s.sql(`SELECT hits FROM basalt.auth_rate_limits WHERE bucket = $1`, [`token_ip:${from}`])).toEqual(
          [{ hits: 13 }],
        );
    });
  });

  describe('credentials before the body', () => {
    test('open mode: Bearer routes without a token and with a bad body → 401, not 422', async () => {
      for (const body of [{}, { current_password: 5 }, { new_password: 'x'.repeat(2000) }]) {
        const r = await call(s, { path: 'password/change', body });
        expectAError(r, 401, 'unauthorized');
        expect(r.headers.get('www-authenticate')).toBe('Bearer');
      }
      const forged = await call(s, { path: 'password/change', body: {}, token: 'eyJhbGciOiJIUzI1NiJ9.e30.bad' });
      expectAError(forged, 401, 'unauthorized');
      // With a valid token the body is validated as before.
      const u = await signInUser(s);
      expect((await call(s, { path: 'password/change', body: {}, token: u.access_token })).status).toBe(422);
    });

    describe('api_key_required', () => {
      let key: string;
      beforeAll(async () => {
        key = await createKey(s, { type: 'public' });
        await s.settings.set('web.public_api_access_mode', 'api_key_required');
      });
      afterAll(() => s.settings.set('web.public_api_access_mode', 'open'));

      const badBodies: [string, unknown][] = [
        ['register', { email: 12 }],
        ['login', {}],
        ['refresh', { refresh_token: ['x'] }],
        ['logout', { all: 'yes' }],
        ['password/forgot', { email: null }],
        ['password/reset', { token: 'x' }],
        ['password/change', {}],
        ['verify-email', {}],
        ['verify-email/resend', { email: 'x'.repeat(400) }],
      ];
      test.each(badBodies)('no key + invalid body on %s → 401 api_key_required', async (path, body) => {
        const r = await call(s, { path, body });
        expectAError(r, 401, 'api_key_required');
      });

      test('with the key: a bad body is a 422 again, and Bearer routes still want the token first', async () => {
        const headers = { 'x-api-key': key };
        expect((await call(s, { path: 'login', body: {}, headers })).status).toBe(422);
        const change = await call(s, { path: 'password/change', body: {}, headers });
        expectAError(change, 401, 'unauthorized');
        const wrongKey = await call(s, { path: 'login', body: {}, headers: { 'x-api-key': 'pk_wrong' } });
        expectAError(wrongKey, 401, 'unauthorized');
      });
    });
  });

  describe('logout needs live credentials', () => {
    test('a spent refresh token is reuse: 401 refresh_token_reused, its session ends, other sessions stay', async () => {
      const a = await signInUser(s);
      const other = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
      const next = (await call(s, { path: 'refresh', body: { refresh_token: a.refresh_token } })).body.data;
      expect((await me(s, next.access_token)).status).toBe(200);
      const r = await call(s, { path: 'logout', body: { refresh_token: a.refresh_token, all: true } });
      expectAError(r, 401, 'refresh_token_reused');
      expectAError(await me(s, next.access_token), 401, 'session_revoked');
      expect((await me(s, other.access_token)).status).toBe(200); // `all` was not honoured
    });

    test('the refresh token of an ended session cannot log the user out everywhere', async () => {
      const a = await signInUser(s);
      expect((await call(s, { path: 'logout', token: a.access_token })).status).toBe(200);
      const b = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
      const r = await call(s, { path: 'logout', body: { refresh_token: a.refresh_token, all: true } });
      expectAError(r, 401, 'session_revoked');
      expect((await me(s, b.access_token)).status).toBe(200);
    });

    test.if(canSql(engine))('an expired refresh token → 401 invalid_refresh_token', async () => {
      const a = await signInUser(s);
      await s.sql(`UPDATE basalt.auth_refresh_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [
        a.refresh_token.split('.')[0],
      ]);
      const r = await call(s, { path: 'logout', body: { refresh_token: a.refresh_token, all: true } });
      expectAError(r, 401, 'invalid_refresh_token');
      expect((await me(s, a.access_token)).status).toBe(200);
    });

    test('the access token of an ended session cannot log the user out everywhere', async () => {
      const a = await signInUser(s);
      const b = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
      expect((await call(s, { path: 'logout', token: a.access_token })).status).toBe(200);
      const r = await call(s, { path: 'logout', token: a.access_token, body: { all: true } });
      expectAError(r, 401, 'session_revoked');
      expect((await me(s, b.access_token)).status).toBe(200);
      // A dead access token with the session's live refresh token: the refresh token decides.
      const c = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
      expect(
        (await call(s, { path: 'logout', token: a.access_token, body: { refresh_token: c.refresh_token } })).status,
      ).toBe(200);
      expectAError(await me(s, c.access_token), 401, 'session_revoked');
      expect((await me(s, b.access_token)).status).toBe(200);
    });

    test('the current refresh token of a live session still logs out (all sessions with all: true)', async () => {
      const a = await signInUser(s);
      const b = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
      expect((await call(s, { path: 'logout', body: { refresh_token: a.refresh_token, all: true } })).status).toBe(200);
      expectAError(await me(s, a.access_token), 401, 'session_revoked');
      expectAError(await me(s, b.access_token), 401, 'session_revoked');
    });
  });

  describe('password policy and lockout through HTTP', () => {
    test('auth.password_min_length applies at once to register, change and reset', async () => {
      const u = await signInUser(s);
      await s.settings.set('auth.password_min_length', 12);
      try {
        const eleven = 'elevenchars';
        const problem = { fields: { password: 'must be at least 12 characters' } };
        const reg = await call(s, { path: 'register', body: { email: email(), password: eleven } });
        expect([reg.status, reg.body.error.details]).toEqual([422, problem]);
        const change = await call(s, {
          path: 'password/change',
          token: u.access_token,
          body: { current_password: PASSWORD, new_password: eleven },
        });
        expect([change.status, change.body.error.details]).toEqual([
          422,
          { fields: { new_password: 'must be at least 12 characters' } },
        ]);
        const reset = await call(s, {
          path: 'password/reset',
          body: { token: await resetToken(s, sink, u), password: eleven },
        });
        expect([reset.status, reset.body.error.details]).toEqual([422, problem]);
        expect((await call(s, { path: 'register', body: { email: email(), password: 'twelve chars' } })).status).toBe(
          201,
        );
        // Existing passwords shorter than the new minimum still log in: the policy is for new passwords.
        expect((await call(s, { path: 'login', body: { email: u.email, password: PASSWORD } })).status).toBe(200);
      } finally {
        await s.settings.set('auth.password_min_length', 8);
      }
      expect((await call(s, { path: 'register', body: { email: email(), password: 'elevenchars' } })).status).toBe(201);
    });

    test('wrong current passwords on password/change count toward lockout: then 429 account_locked there and on login', async () => {
      const u = await signInUser(s);
      const from = ip();
      for (let i = 0; i < 5; i++) {
        const r = await call(s, {
          path: 'password/change',
          ip: from,
          token: u.access_token,
          body: { current_password: 'not my password', new_password: 'a brand new secret' },
        });
        expectAError(r, 400, 'invalid_current_password');
      }
      const change = await call(s, {
        path: 'password/change',
        ip: from,
        token: u.access_token,
        body: { current_password: PASSWORD, new_password: 'a brand new secret' },
      });
      expectAError(change, 429, 'account_locked', { retry_after: expect.any(Number) });
      expect(Number(change.headers.get('retry-after'))).toBeGreaterThan(850);
      expectAError(
        await call(s, { path: 'login', ip: from, body: { email: u.email, password: PASSWORD } }),
        429,
        'account_locked',
        { retry_after: expect.any(Number) },
      );
      // The session itself is not ended by the lock.
      expect((await me(s, u.access_token)).status).toBe(200);
    });
  });
});

describe.each(ENGINES)('X-Forwarded-For from an untrusted peer on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    // Only 10.0.0.0/8 is a proxy: this test's requests come from 127.0.0.1, an untrusted peer.
    s = await startAuthServer(engine, { env: { BASALT_WEB_TRUSTED_PROXIES: '10.0.0.0/8' } });
  });
  afterAll(() => s.stop());

  test('a forged header per request does not dodge the per-IP login limit', async () => {
    for (let i = 0; i < 10; i++)
      expect(
        (await call(s, { path: 'login', body: { email: email('nobody'), password: 'whatever1' }, ip: ip() })).status,
      ).toBe(401);
    expectLimited(await call(s, { path: 'login', body: { email: email('nobody'), password: 'whatever1' }, ip: ip() }));
    if (!canSql(engine)) return;
    const rows = await s.sql<{ bucket: string }>(
      `SELECT bucket FROM basalt.auth_rate_limits WHERE bucket LIKE 'login_ip:%'`,
    );
    expect(rows.map((r) => r.bucket)).toEqual(['login_ip:127.0.0.1']);
  });
});

describe('password change and reset across two instances on one external database', () => {
  let sink: SmtpSink;
  beforeAll(async () => {
    sink = await startSmtpSink();
  });
  const two = twoInstances(() => mailEnv(sink));
  afterAll(() => sink.close());

  test.skipIf(!two.external)(
    "password change on one instance ends the other sessions on the other instance at once; the changer's stays",
    async () => {
      const { a, b } = two;
      const u = await signInUser(a);
      const other = (await call(b, { path: 'login', body: { email: u.email, password: PASSWORD } })).body.data;
      // B caches both sessions as live first.
      expect((await me(b, other.access_token)).status).toBe(200);
      expect((await me(b, u.access_token)).status).toBe(200);
      expect(
        (
          await call(a, {
            path: 'password/change',
            token: u.access_token,
            body: { current_password: PASSWORD, new_password: 'a brand new secret' },
          })
        ).status,
      ).toBe(200);
      expectAError(await meUntilRefused(b, other.access_token), 401, 'session_revoked');
      expect((await me(b, u.access_token)).status).toBe(200);
    },
  );

  test.skipIf(!two.external)('password reset on one instance ends every session on the other at once', async () => {
    const { a, b } = two;
    const u = await signInUser(a);
    const other = (await call(b, { path: 'login', body: { email: u.email, password: PASSWORD } })).body.data;
    expect((await me(b, other.access_token)).status).toBe(200);
    expect((await me(b, u.access_token)).status).toBe(200);
    const token = await resetToken(a, sink, u);
    expect((await call(a, { path: 'password/reset', body: { token, password: 'a brand new secret' } })).status).toBe(
      200,
    );
    expectAError(await meUntilRefused(b, other.access_token), 401, 'session_revoked');
    expectAError(await meUntilRefused(b, u.access_token), 401, 'session_revoked');
  });
});
