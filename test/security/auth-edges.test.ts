/**
 * Edges of Public Auth found by the security review (docs/auth.md): the `redirect_to`
 * path rules (encoded slashes, dot segments, `;`, backslashes refused, not resolved),
 * confirming TOTP ends the user's other sessions, and concurrent refreshes of one refresh
 * token within the reuse interval — one rotation, every racer gets the same new refresh
 * token, the session lives on — while a reuse after the interval still revokes the session.
 * Over HTTP: runs against the executable (scripts/test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Secret, TOTP } from 'otpauth';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { expectA, expectAError } from '../helpers/envelopes';
import { signInUser } from '../helpers/users';
import { call, startAuthServer } from '../auth/support';

const APP = 'https://app.example.com';

/** [redirect_to, accepted] against the allow-list [APP/done/, APP/auth]. */
const REDIRECTS: [string, boolean][] = [
  [`${APP}/done/`, true],
  [`${APP}/done/x?next=%2Fa%2F..%2Fb;c`, true],
  [`${APP}/done/a.b/c..d/.well-known`, true],
  [`${APP}/done/%7Euser/caf%C3%A9`, true],
  [`${APP}/done/x#ignored`, true],
  [`${APP}/auth`, true],
  [`${APP}/done/..%2fevil`, false],
  [`${APP}/done/..%2Fevil`, false],
  [`${APP}/done/%2e%2e/evil`, false],
  [`${APP}/done/%2E%2E%2Fevil`, false],
  [`${APP}/done/.%2e/evil`, false],
  [`${APP}/done/%252e%252e/evil`, false],
  [`${APP}/done/..%252fevil`, false],
  [`${APP}/done/..;/evil`, false],
  [`${APP}/done/;jsessionid=x`, false],
  [`${APP}/done/x%3b/y`, false],
  [`${APP}/done/..%5cevil`, false],
  [`${APP}/done\\..\\evil`, false],
  [`${APP}/done/./x`, false],
  [`${APP}/done/../done/x`, false],
  [`${APP}/done/.\t./evil`, false],
  [`${APP}/done/%zz`, false],
  [`${APP}/evil`, false],
];

function totpCode(secret: string): string {
  return new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate();
}

describe.each(ENGINES)('auth edges on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAuthServer(engine);
    // A provider nobody answers for: a redirect_to that passes gets as far as asking it (502).
    const provider = { name: 'test', issuer: 'http://127.0.0.1:9', client_id: 'x', client_secret: 'y' };
    await s.settings.set('auth.oauth_providers', [provider]);
    await s.settings.set('auth.redirect_allowlist', [`${APP}/done/`, `${APP}/auth`]);
  }, 180_000);
  afterAll(() => s?.stop());

  const refresh = (token: string) => call(s, { path: 'refresh', body: { refresh_token: token } });
  const me = (token: string) => call(s, { method: 'GET', path: 'me', token });

  test('redirect_to: encoded slashes, dot segments (also encoded), ; and backslashes in the path → 400 naming redirect_to', async () => {
    const start = (to: string) =>
      s.req('GET', `/api/v1/auth/oauth/test/start?redirect_to=${encodeURIComponent(to)}`, { redirect: 'manual' });
    for (const [to, accepted] of REDIRECTS) {
      const r = await start(to);
      if (accepted) {
        expect([to, r.status, r.body?.error?.code]).toEqual([to, 502, 'provider_unavailable']);
        continue;
      }
      expect([to, r.status]).toEqual([to, 400]);
      expectAError(r, 400, 'invalid_redirect', {
        message: expect.stringMatching(/^redirect_to /),
        details: { fields: { redirect_to: expect.any(String) } },
      });
    }
    // The link route applies the same rule.
    const u = await signInUser(s);
    expectAError(
      await call(s, { path: 'oauth/test/link', token: u.access_token, body: { redirect_to: `${APP}/done/..;/evil` } }),
      400,
      'invalid_redirect',
      { details: { fields: { redirect_to: expect.stringContaining(';') } } },
    );
  });

  test("confirming TOTP ends the user's other sessions; the confirming one stays", async () => {
    const a = await signInUser(s);
    const b = await signInUser(s, { email: a.email, register: false });
    const enroll = expectA(await call(s, { path: 'mfa/totp/enroll', token: a.access_token }), 200);
    expectA(
      await call(s, { path: 'mfa/totp/confirm', token: a.access_token, body: { code: totpCode(enroll.secret) } }),
      200,
    );
    // The other session: its access token and its refresh token are refused.
    expectAError(await me(b.access_token), 401, 'session_revoked');
    expectAError(await refresh(b.refresh_token), 401, 'session_revoked');
    // The one that confirmed goes on.
    expectA(await me(a.access_token), 200);
    expectA(await refresh(a.refresh_token), 200);
  });

  test('concurrent refreshes of one token: one rotation, all get the same new refresh token, the session lives on', async () => {
    const u = await signInUser(s);
    const answers = await Promise.all(Array.from({ length: 6 }, () => refresh(u.refresh_token)));
    for (const r of answers) expectA(r, 200);
    const successor: string = answers[0]!.body.data.refresh_token;
    expect(answers.map((r) => r.body.data.refresh_token)).toEqual(answers.map(() => successor));
    expect(successor).not.toBe(u.refresh_token);
    for (const r of answers) expectA(await me(r.body.data.access_token), 200);
    // The successor is the session's current token: it rotates as usual.
    const after = expectA(await refresh(successor), 200);
    // Now the first token's successor is spent too: the first token is reuse even within the interval.
    expectAError(await refresh(u.refresh_token), 401, 'refresh_token_reused');
    expectAError(await refresh(after.refresh_token), 401, 'session_revoked');
  });

  test('a spent refresh token presented after the reuse interval is reuse: the session is revoked', async () => {
    await s.settings.set('auth.refresh_reuse_interval_seconds', 1);
    try {
      const u = await signInUser(s);
      const r = expectA(await refresh(u.refresh_token), 200);
      await Bun.sleep(2_100); // the interval is counted by the database's clock, in whole seconds
      expectAError(await refresh(u.refresh_token), 401, 'refresh_token_reused');
      expectAError(await refresh(r.refresh_token), 401, 'session_revoked');
      expectAError(await me(r.access_token), 401, 'session_revoked');
    } finally {
      await s.settings.unset('auth.refresh_reuse_interval_seconds');
    }
  });
});
