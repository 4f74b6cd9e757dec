/**
 * The Users screen's sign-in methods (docs/admin-api.md §Users): a user's providers,
 * password and second factor; resetting MFA and unlinking a provider, each audited and
 * never leaving the user without a way to sign in; the Settings screen's provider check
 * against a real OpenID Connect provider. Over HTTP: runs against the executable
 * (scripts/test.ts); a provider is linked to a user through the linking flow.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Secret, TOTP } from 'otpauth';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { expectA, expectAError } from '../helpers/envelopes';
import { signInUser } from '../helpers/users';
import { auditRows, startAdminServer } from './support';
import { confirmLink, fragment, startProvider, walk, type TestProvider } from '../auth/provider';

describe.each(ENGINES)('sign-in methods on the Users screen on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  let idp: TestProvider;
  beforeAll(async () => {
    idp = await startProvider();
    s = await startAdminServer(engine);
    await s.settings.set('auth.oauth_providers', [
      ...idp.settings(['test']),
      { name: 'down', issuer: 'http://127.0.0.1:9', client_id: 'x', client_secret: 'y' },
    ]);
    await s.settings.set('auth.redirect_allowlist', ['https://app.example.com']);
    a = await signInAdmin(s);
  }, 180_000);
  afterAll(async () => {
    await s?.stop();
    await idp?.stop();
  });

  test('methods, reset MFA and unlink, audited; the last way to sign in stays', async () => {
    // A passwordless user made by the provider, with TOTP on.
    idp.as({ sub: 'admin-view', email: 'admin-view@example.com', email_verified: true });
    const w = await walk(s, 'test', 'https://app.example.com/');
    const ex = await s.req('POST', '/api/v1/auth/oauth/exchange', {
      body: { code: fragment(w.final.location).get('code') },
    });
    const token = ex.body.data.access_token;
    const userId = ex.body.data.user.id;
    const bearer = { authorization: `Bearer ${token}` };
    const { secret } = (await s.req('POST', '/api/v1/auth/mfa/totp/enroll', { headers: bearer })).body.data;
    const code = new TOTP({ secret: Secret.fromBase32(secret) }).generate();
    expect((await s.req('POST', '/api/v1/auth/mfa/totp/confirm', { headers: bearer, body: { code } })).status).toBe(
      200,
    );

    const methods = await adminReq(s, a, 'GET', `/api/admin/users/${userId}/sign-in-methods`);
    expectA(
      methods,
      200,
      expect.objectContaining({ has_password: false, totp_enabled: true, recovery_codes_left: 10 }),
    );
    const identity = methods.body.data.identities[0].id;
    expectAError(
      await adminReq(s, a, 'DELETE', `/api/admin/users/${userId}/identities/${identity}`),
      409,
      'last_sign_in_method',
    );
    expect(await auditRows(s, 'users.unlink-identity', a)).toHaveLength(0); // refused: nothing written

    const reset = await adminReq(s, a, 'POST', `/api/admin/users/${userId}/reset-mfa`);
    expectA(reset, 200, expect.objectContaining({ totp_enabled: false, recovery_codes_left: 0 }));
    const [row] = await auditRows(s, 'users.reset-mfa', a);
    expect(row).toMatchObject({ target: userId, admin_email: a.email });
    // The user signs in with the provider alone again.
    const again = await walk(s, 'test', 'https://app.example.com/');
    const ex2 = await s.req('POST', '/api/v1/auth/oauth/exchange', {
      body: { code: fragment(again.final.location).get('code') },
    });
    expect(ex2.body.data.access_token).toBeString();

    // A user with a password may lose every provider.
    const u = await signInUser(s);
    idp.as({ sub: 'pw-user', email: u.email, email_verified: true });
    const link = await s.req('POST', '/api/v1/auth/oauth/test/link', {
      headers: { authorization: `Bearer ${u.access_token}` },
      body: { redirect_to: 'https://app.example.com/' },
    });
    const ticket = new URL(link.body.data.url).searchParams.get('link')!;
    const linked = await walk(s, 'test', 'https://app.example.com/', { link: ticket });
    expect((await confirmLink(linked)).location).toBe('https://app.example.com/#linked=test');
    const mine = (await adminReq(s, a, 'GET', `/api/admin/users/${u.user.id}/sign-in-methods`)).body.data.identities[0]
      .id;
    expectA(
      await adminReq(s, a, 'DELETE', `/api/admin/users/${u.user.id}/identities/${mine}`),
      200,
      expect.objectContaining({ identities: [], has_password: true }),
    );
    expect((await auditRows(s, 'users.unlink-identity', a)).map((r) => r.target)).toEqual([u.user.id]);
    expectAError(await adminReq(s, a, 'GET', '/api/admin/users/not-a-user/sign-in-methods'), 404, 'not_found');
    // Without a session: refused like every admin route.
    expect((await s.req('POST', `/api/admin/users/${userId}/reset-mfa`)).status).toBe(401);
  });

  test('provider check: discovery works for a live provider, names the problem for a dead one', async () => {
    expectA(await adminReq(s, a, 'GET', '/api/admin/sign-in-providers'), 200, { providers: ['test', 'down'] });
    const live = expectA(
      await adminReq(s, a, 'POST', '/api/admin/sign-in-providers/test/check'),
      200,
      expect.objectContaining({ ok: true, authorization_endpoint: `${idp.issuer}/authorize` }),
    );
    // Discovery, the JWKS, the authorization URL this instance would send a browser to, the token endpoint.
    expect(live.checks.map((c: { step: string }) => c.step)).toEqual([
      'discovery',
      'jwks',
      'authorization_url',
      'token_endpoint',
    ]);
    expect(live.checks[1]).toMatchObject({ ok: true, detail: expect.stringMatching(/^1 signing key\(s\) at /) });
    const authorize = new URL(live.authorization_url);
    expect(authorize.origin + authorize.pathname).toBe(`${idp.issuer}/authorize`);
    expect(authorize.searchParams.get('redirect_uri')).toBe(live.redirect_uri);
    expect(live.redirect_uri).toEndWith('/api/v1/auth/oauth/test/callback');
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('client_id')).toBe('basalt-test');
    expect(live.checks[3].ok).not.toBe(false);
    const down = await adminReq(s, a, 'POST', '/api/admin/sign-in-providers/down/check');
    expectA(down, 200, expect.objectContaining({ ok: false, problem: expect.stringMatching(/^discovery: /) }));
    expect(down.body.data.checks).toEqual([{ step: 'discovery', ok: false, detail: expect.any(String) }]);
    expectAError(await adminReq(s, a, 'POST', '/api/admin/sign-in-providers/nope/check'), 404, 'provider_not_found');
  });
  test('provider check: documents are judged, never shown (status, not JSON, wrong issuer, scheme/host refused); sign-in applies the same rule', async () => {
    const SECRET = 'INTERNAL-ONLY-7f3a9c';
    const hits: string[] = [];
    const fake: { port?: number; stop(force: boolean): void } = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch(req): Response {
        const path = new URL(req.url).pathname;
        hits.push(path);
        const base = `http://127.0.0.1:${fake.port}`;
        const meta = (name: string, extra: Record<string, unknown> = {}) =>
          Response.json({
            issuer: `${base}/${name}`,
            authorization_endpoint: `${base}/${name}/authorize`,
            token_endpoint: `${base}/${name}/token`,
            jwks_uri: `${base}/${name}/jwks`,
            response_types_supported: ['code'],
            ...extra,
          });
        const [, name, rest] = /^\/([^/]+)(\/.*)$/.exec(path) ?? [];
        if (rest === '/.well-known/openid-configuration')
          switch (name) {
            case 'html-jwks':
            case 'jwks-500':
              return meta(name);
            case 'ssrf-jwks':
              return meta(name, { jwks_uri: `http://0.0.0.0:${fake.port}/internal` });
            case 'wrong-issuer':
              return meta(name, { issuer: `https://${SECRET}.example` });
            case 'discovery-500':
              return new Response(SECRET, { status: 500 });
            case 'discovery-html':
              return new Response(`<p>${SECRET}</p>`, { headers: { 'content-type': 'application/json' } });
          }
        if (path === '/html-jwks/jwks') return new Response(`${SECRET} is not a key set`);
        if (path === '/jwks-500/jwks') return new Response(SECRET, { status: 500 });
        if (path === '/internal') return new Response(`{"keys": [{"secret": "${SECRET}"}]}`);
        return new Response('not found', { status: 404 });
      },
    });
    const names = ['html-jwks', 'jwks-500', 'ssrf-jwks', 'wrong-issuer', 'discovery-500', 'discovery-html'];
    await s.settings.set('auth.oauth_providers', [
      ...idp.settings(['test']),
      ...names.map((name) => ({
        name,
        issuer: `http://127.0.0.1:${fake.port}/${name}`,
        client_id: 'x',
        client_secret: 'y',
      })),
    ]);
    try {
      const expected: Record<string, [string, RegExp]> = {
        'html-jwks': ['jwks', /not JSON/],
        'jwks-500': ['jwks', /HTTP 500/],
        'ssrf-jwks': ['discovery', /jwks_uri: scheme\/host refused/],
        'wrong-issuer': ['discovery', /wrong issuer/],
        'discovery-500': ['discovery', /HTTP 500/],
        'discovery-html': ['discovery', /not JSON/],
      };
      for (const name of names) {
        const r = await adminReq(s, a, 'POST', `/api/admin/sign-in-providers/${name}/check`);
        const data = expectA(r, 200, expect.objectContaining({ ok: false }));
        const [step, detail] = expected[name]!;
        const failed = data.checks.find((c: { ok: boolean | null }) => c.ok === false);
        expect([name, failed.step, failed.detail]).toEqual([name, step, expect.stringMatching(detail)]);
        expect([name, JSON.stringify(r.body)]).toEqual([name, expect.not.stringContaining(SECRET)]);
      }
      // The refused jwks_uri was never asked; a sign-in with that provider stops at the same rule.
      expect(hits).not.toContain('/internal');
      const start = await s.req(
        'GET',
        `/api/v1/auth/oauth/ssrf-jwks/start?redirect_to=${encodeURIComponent('https://app.example.com/')}`,
        { redirect: 'manual' },
      );
      expectAError(start, 502, 'provider_unavailable');
      expect(hits).not.toContain('/internal');
    } finally {
      fake.stop(true);
      await s.settings.set('auth.oauth_providers', [
        ...idp.settings(['test']),
        { name: 'down', issuer: 'http://127.0.0.1:9', client_id: 'x', client_secret: 'y' },
      ]);
    }
  });
});
