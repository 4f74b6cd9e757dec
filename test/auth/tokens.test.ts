/**
 * Access and refresh tokens: rotation, reuse detection, logout, revocation that
 * ends access tokens at once (also on a second instance), expiry, forgery. The signing key
 * is set as auth.jwt_secret, so the test can sign tokens of its own. (Housekeeping, which
 * runs on a 15-minute timer: ./housekeeping.test.ts, on the source.)
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { PASSWORD, call, startAuthServer, twoInstances } from './support';
import { signInUser } from '../helpers/users';
import { eventually } from '../helpers/wait';
import { expectA, expectAError, expectB, expectBError } from '../helpers/envelopes';

const me = (s: TestServer, token: string) => call(s, { method: 'GET', path: 'me', token });
const SECRET = 'the signing key of the tokens suite, set by the operator';

/** An extension route behind the user guard: the caller, or its errors in the extension's envelope (format B). */
const PROBE = `
import { defineExtension } from 'basalt';
export default defineExtension({ name: 'probe', version: '1.0.0', setup(ctx) {
  ctx.routes.get('/whoami', ({ user, request }) => ctx.reply(request, user), { user: true });
} });
`;

describe.each(ENGINES)('tokens on %s', (engine) => {
  let s: TestServer;
  const extensions = mkdtempSync(join(tmpdir(), 'basalt-probe-'));
  beforeAll(async () => {
    mkdirSync(join(extensions, 'probe'));
    writeFileSync(join(extensions, 'probe', 'index.ts'), PROBE);
    s = await startAuthServer(engine, {
      env: { BASALT_EXTENSIONS_DIR: extensions, BASALT_AUTH_JWT_SECRET: SECRET },
    });
  });
  afterAll(async () => {
    await s.stop();
    rmSync(extensions, { recursive: true, force: true });
  });

  test("requireUser in another area: the user, or errors in that area's envelope", async () => {
    const u = await signInUser(s);
    const ok = await s.req('GET', '/api/module/probe/whoami', {
      headers: { authorization: `Bearer ${u.access_token}` },
    });
    expectB(ok, 200, { userId: u.user.id, sessionId: expect.any(String), email: u.email, amr: ['pwd'], aal: 1 });
    const none = await s.req('GET', '/api/module/probe/whoami');
    expectBError(none, 401, 'unauthorized');
    await call(s, { path: 'logout', token: u.access_token });
    const gone = await s.req('GET', '/api/module/probe/whoami', {
      headers: { authorization: `Bearer ${u.access_token}` },
    });
    expectBError(gone, 401, 'session_revoked');
  });

  test('refresh rotates: new pair, same session; the old refresh token is spent', async () => {
    const u = await signInUser(s);
    const r1 = await call(s, { path: 'refresh', body: { refresh_token: u.refresh_token } });
    expect(r1.status).toBe(200);
    expect(r1.body.data).toEqual(
      expect.objectContaining({
        user: expect.objectContaining({ email: u.email }),
        token_type: 'Bearer',
        expires_in: 900,
      }),
    );
    expect(r1.body.data.refresh_token).not.toBe(u.refresh_token);
    const m = await me(s, r1.body.data.access_token);
    expect(m.body.data.session_id).toBe((await me(s, u.access_token)).body.data.session_id);
    const r2 = await call(s, { path: 'refresh', body: { refresh_token: r1.body.data.refresh_token } });
    expect(r2.status).toBe(200);
  });

  test('reuse of a rotated refresh token revokes the whole session', async () => {
    const u = await signInUser(s);
    const first = (await call(s, { path: 'refresh', body: { refresh_token: u.refresh_token } })).body.data;
    // Its successor spent too: the first token is no retry of a lost answer (docs/auth.md, the reuse interval).
    const next = (await call(s, { path: 'refresh', body: { refresh_token: first.refresh_token } })).body.data;
    const reuse = await call(s, { path: 'refresh', body: { refresh_token: u.refresh_token } });
    expectAError(reuse, 401, 'refresh_token_reused');
    // Everything of that session is dead: the newest refresh token and every access token.
    expectAError(
      await call(s, { path: 'refresh', body: { refresh_token: next.refresh_token } }),
      401,
      'session_revoked',
    );
    expectAError(await me(s, next.access_token), 401, 'session_revoked');
    expectAError(await me(s, u.access_token), 401, 'session_revoked');
  });

  test('two refreshes racing with one token: one rotation, both get the same new refresh token', async () => {
    const u = await signInUser(s);
    const both = await Promise.all(
      [0, 1].map(() => call(s, { path: 'refresh', body: { refresh_token: u.refresh_token } })),
    );
    expect(both.map((r) => r.status)).toEqual([200, 200]);
    expect(both[0]!.body.data.refresh_token).toBe(both[1]!.body.data.refresh_token);
  });

  // Every row has all five columns: bun takes a test function with more parameters than the row for one awaiting `done`.
  const refreshCases: [string, unknown, number, string, Record<string, unknown>][] = [
    [
      'unknown token of the right shape',
      { refresh_token: 'AAAAAAAAAAAAAAAA.' + 'B'.repeat(43) },
      401,
      'invalid_refresh_token',
      {},
    ],
    ['malformed token', { refresh_token: 'nope' }, 401, 'invalid_refresh_token', {}],
    ['missing field', {}, 422, 'validation_error', { details: { fields: { refresh_token: expect.any(String) } } }],
  ];
  test.each(refreshCases)('refresh: %s', async (_n, body, status, code, extra) => {
    expectAError(await call(s, { path: 'refresh', body }), status, code, extra);
  });

  test('refresh: a genuine id with a wrong secret is refused', async () => {
    const u = await signInUser(s);
    const forged = u.refresh_token.split('.')[0] + '.' + 'C'.repeat(43);
    expectAError(await call(s, { path: 'refresh', body: { refresh_token: forged } }), 401, 'invalid_refresh_token');
    expect((await call(s, { path: 'refresh', body: { refresh_token: u.refresh_token } })).status).toBe(200); // not burned by the forgery
  });

  test('logout with the access token: that session ends at once, others stay', async () => {
    const a = await signInUser(s);
    const b = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
    expect((await me(s, a.access_token)).status).toBe(200); // warm the session cache
    const out = await call(s, { path: 'logout', token: a.access_token });
    expectA(out, 200, { message: 'Logged out.' });
    expectAError(await me(s, a.access_token), 401, 'session_revoked');
    expectAError(await call(s, { path: 'refresh', body: { refresh_token: a.refresh_token } }), 401, 'session_revoked');
    expect((await me(s, b.access_token)).status).toBe(200);
  });

  test('logout with only the refresh token, and logout of all sessions', async () => {
    const a = await signInUser(s);
    const b = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
    expect((await call(s, { path: 'logout', body: { refresh_token: a.refresh_token } })).status).toBe(200);
    expectAError(await me(s, a.access_token), 401, 'session_revoked');
    expect((await me(s, b.access_token)).status).toBe(200);
    const c = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
    expect((await call(s, { path: 'logout', token: c.access_token, body: { all: true } })).status).toBe(200);
    expectAError(await me(s, b.access_token), 401, 'session_revoked');
    expectAError(await me(s, c.access_token), 401, 'session_revoked');
  });

  const logoutCases: [string, () => { token?: string; body?: unknown }, number, string][] = [
    ['no credentials', () => ({}), 401, 'unauthorized'],
    ['forged access token', () => ({ token: 'eyJhbGciOiJIUzI1NiJ9.e30.bad' }), 401, 'unauthorized'],
    [
      'unknown refresh token',
      () => ({ body: { refresh_token: 'AAAAAAAAAAAAAAAA.' + 'B'.repeat(43) } }),
      401,
      'invalid_refresh_token',
    ],
  ];
  test.each(logoutCases)('logout: %s', async (_n, c, status, code) => {
    const r = await call(s, { path: 'logout', ...c() });
    expectAError(r, status, code);
  });

  test('expired access token → 401 token_expired; alg none and other keys → unauthorized', async () => {
    const u = await signInUser(s);
    const { sub, sid } = JSON.parse(Buffer.from(u.access_token.split('.')[1]!, 'base64url').toString());
    const secret = SECRET;
    const signer = (opts: { secret: string }) => ({
      sign: ({ exp, ...claims }: { sub: string; sid: string; exp: number | string }) =>
        new SignJWT({ iss: 'basalt', ...claims })
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
          .setExpirationTime(exp)
          .setIssuedAt()
          .sign(new TextEncoder().encode(opts.secret)),
    });
    const expired = await signer({ secret }).sign({ sub, sid, exp: Math.floor(Date.now() / 1000) - 5 });
    const r = await me(s, expired);
    expectAError(r, 401, 'token_expired');
    const otherKey = await signer({ secret: 'another secret entirely' }).sign({ sub, sid, exp: '5m' });
    expectAError(await me(s, otherKey), 401, 'unauthorized');
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub, sid, iss: 'basalt', exp: 9e9 })).toString('base64url')}.`;
    expectAError(await me(s, none), 401, 'unauthorized');
    // A valid signature for a session that belongs to someone else is refused too.
    const other = await signInUser(s);
    const mixed = await signer({ secret }).sign({ sub: other.user.id, sid, exp: '5m' });
    expectAError(await me(s, mixed), 401, 'session_revoked');
  });

  test('password change: other sessions end, this one stays, new password works', async () => {
    const a = await signInUser(s);
    const b = (await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).body.data;
    const cases: [unknown, number, string | null][] = [
      [{ current_password: 'wrong one!', new_password: 'a brand new secret' }, 400, 'invalid_current_password'],
      [{ current_password: PASSWORD, new_password: 'short' }, 422, 'validation_error'],
      [{ current_password: PASSWORD }, 422, 'validation_error'],
      [{ current_password: PASSWORD, new_password: 'a brand new secret' }, 200, null],
    ];
    for (const [body, status, code] of cases) {
      const r = await call(s, { path: 'password/change', token: a.access_token, body });
      if (code) expectAError(r, status, code);
      else expect(r.status).toBe(status);
    }
    expect((await me(s, a.access_token)).status).toBe(200);
    expectAError(await me(s, b.access_token), 401, 'session_revoked');
    expect((await call(s, { path: 'login', body: { email: a.email, password: PASSWORD } })).status).toBe(401);
    expect((await call(s, { path: 'login', body: { email: a.email, password: 'a brand new secret' } })).status).toBe(
      200,
    );
    expect(
      (await call(s, { path: 'password/change', body: { current_password: 'x', new_password: 'yyyyyyyyyy' } })).status,
    ).toBe(401);
  });
});

describe('revocation across two instances on one external database', () => {
  const two = twoInstances();

  test.skipIf(!two.external)('logout on one instance ends the access token on the other at once', async () => {
    const { a, b } = two;
    const u = await signInUser(a);
    // Instance B verifies (and caches) the session first.
    expect((await me(b, u.access_token)).status).toBe(200);
    expect((await call(a, { path: 'logout', token: u.access_token })).status).toBe(200);
    // NOTIFY reaches B within milliseconds; give it a moment rather than the cache TTL (30 s).
    const r = await eventually(() => me(b, u.access_token), {
      timeout: 2000,
      interval: 20,
      until: (r) => r.status !== 200,
      what: 'B to refuse the token',
    });
    expectAError(r, 401, 'session_revoked');
  });

  test.skipIf(!two.external)(
    'a refresh token rotated on one instance: its replay on the other gets the same successor; a reuse is reuse there',
    async () => {
      const { a, b } = two;
      const u = await signInUser(a);
      const first = await call(a, { path: 'refresh', body: { refresh_token: u.refresh_token } });
      expect(first.status).toBe(200);
      const replay = await call(b, { path: 'refresh', body: { refresh_token: u.refresh_token } });
      expect(replay.body.data.refresh_token).toBe(first.body.data.refresh_token);
      expect((await call(a, { path: 'refresh', body: { refresh_token: first.body.data.refresh_token } })).status).toBe(
        200,
      );
      expectAError(
        await call(b, { path: 'refresh', body: { refresh_token: u.refresh_token } }),
        401,
        'refresh_token_reused',
      );
    },
  );
});
