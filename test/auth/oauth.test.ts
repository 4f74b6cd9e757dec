/**
 * Provider sign-in against a real OpenID Connect provider running in this process
 * (test/auth/provider.ts), over HTTP, redirects followed by hand: the whole flow, the
 * state bound to the browser, the one-time exchange code, the redirect allow-list, the
 * ID token checks, the account rule with its pre-hijacking defence (more in ownership.test.ts), GitHub-style plain
 * OAuth2, linking and unlinking. Runs against the compiled executable too
 * (scripts/test-executable.ts): settings through its admin API, database reads on the
 * source only.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, type TestServer } from '../helpers/server';
import { expectA, expectAError } from '../helpers/envelopes';
import { call, email, markVerified, startAuthServer, PASSWORD } from './support';
import { registerUser, signInUser } from '../helpers/users';
import { claimsOf, confirmLink, fragment, hop, startProvider, walk, type TestProvider } from './provider';
import { adminReq, signInAdmin } from '../helpers/admin';

const APP = 'https://app.example.com';
const BACK = `${APP}/auth/done`;

/** The admin provider check (Settings, Test sign-in), as a signed-in administrator on either target. */
async function providerCheck(s: TestServer, name: string) {
  const path = `/api/admin/sign-in-providers/${name}/check`;
  const r =
    s.target === 'executable' ? await s.admin('POST', path) : await adminReq(s, await signInAdmin(s), 'POST', path);
  return expectA(r, 200);
}

/** The redirect_uri the start route sends the browser to the provider with. */
async function startRedirectUri(s: TestServer, name: string): Promise<string | null> {
  const start = await hop(`${s.publicUrl}/api/v1/auth/oauth/${name}/start?redirect_to=${encodeURIComponent(BACK)}`);
  return new URL(start.location).searchParams.get('redirect_uri');
}

describe.each(ENGINES)('provider sign-in on %s', (engine) => {
  let s: TestServer;
  let idp: TestProvider;
  beforeAll(async () => {
    idp = await startProvider();
    s = await startAuthServer(engine);
    // Live settings: the server is already running (no restart).
    await s.settings.set('auth.oauth_providers', idp.settings(['test', 'github']));
    await s.settings.set('auth.redirect_allowlist', [`${APP}/auth/`, 'http://localhost:3000']);
  }, 180_000);
  afterAll(async () => {
    await s.stop();
    await idp.stop();
  });

  const exchange = (code: string) => call(s, { path: 'oauth/exchange', body: { code } });

  test('a new verified identity makes a verified account; the fragment code works once; no token in any URL', async () => {
    const address = email('oidc');
    idp.as({ sub: `sub-${address}`, email: address.toUpperCase(), email_verified: true });
    const w = await walk(s, 'test', BACK);
    // Start: to the provider with PKCE S256, state and nonce; the binding cookie's attributes.
    const authorize = new URL(w.start.location);
    expect(authorize.origin).toBe(idp.issuer);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authorize.searchParams.get('state')!.length).toBeGreaterThanOrEqual(32);
    expect(authorize.searchParams.get('nonce')!.length).toBeGreaterThanOrEqual(32);
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${s.publicUrl}/api/v1/auth/oauth/test/callback`);
    const attrs = w.start.setCookie!.split(';').map((a) => a.trim().toLowerCase());
    expect(attrs).toEqual(
      expect.arrayContaining(['httponly', 'samesite=lax', 'path=/api/v1/auth/oauth/', 'max-age=600']),
    );
    expect(attrs).not.toContain('secure'); // plain http here; https requests get Secure
    // Callback: back to redirect_to with only a one-time code in the fragment.
    expect(w.final.status).toBe(302);
    expect(w.final.location.startsWith(`${BACK}#code=`)).toBe(true);
    const code = fragment(w.final.location).get('code')!;
    expect(code.split('.')).toHaveLength(2); // opaque, not a JWT
    for (const url of [w.start.location, w.toCallback, w.final.location]) expect(url).not.toMatch(/eyJ|access_token/);
    const r = await exchange(code);
    expectA(
      r,
      200,
      expect.objectContaining({
        user: expect.objectContaining({ email: address, email_verified: true }),
        access_token: expect.any(String),
        refresh_token: expect.any(String),
      }),
    );
    expect(claimsOf(r.body.data.access_token)).toMatchObject({ amr: ['oauth'], aal: 1 });
    expectAError(await exchange(code), 400, 'invalid_exchange_code'); // replayed
    // The same provider account signs in to the same user again.
    const again = await walk(s, 'test', BACK);
    const r2 = await exchange(fragment(again.final.location).get('code')!);
    expect(r2.body.data.user.id).toBe(r.body.data.user.id);
    // A refreshed access token keeps the session's amr.
    const refreshed = await call(s, { path: 'refresh', body: { refresh_token: r.body.data.refresh_token } });
    expect(claimsOf(refreshed.body.data.access_token)).toMatchObject({ amr: ['oauth'], aal: 1 });
  });

  test("the admin check shows the start route's callback: the request's origin, else web.public_base_url", async () => {
    const own = `${s.publicUrl}/api/v1/auth/oauth/test/callback`;
    expect(await startRedirectUri(s, 'test')).toBe(own);
    const check = await providerCheck(s, 'test');
    expect(check).toMatchObject({ ok: true, redirect_uri: own });
    expect(new URL(check.authorization_url).searchParams.get('redirect_uri')).toBe(own);
    await s.settings.set('web.public_base_url', 'https://api.example.com/');
    try {
      const behindProxy = 'https://api.example.com/api/v1/auth/oauth/github/callback';
      expect(await startRedirectUri(s, 'github')).toBe(behindProxy);
      expect(await providerCheck(s, 'github')).toMatchObject({ redirect_uri: behindProxy });
    } finally {
      await s.settings.unset('web.public_base_url');
    }
  });

  test('pre-hijacking: a provider vouching for the address takes the unverified account over; an unvouched address links nothing', async () => {
    // The attacker registers the victim's address with a password, never verifying it.
    const victim = email('victim');
    const attacker = await registerUser(s, { email: victim });
    // A provider that does not vouch for the address: nothing linked, nothing made.
    idp.as({ sub: `sub-${victim}`, email: victim, email_verified: false });
    const refused = await walk(s, 'test', BACK);
    expect(fragment(refused.final.location).get('error')).toBe('email_not_verified');
    expect(fragment(refused.final.location).get('code')).toBeNull();
    if (ON_SOURCE) {
      const linked = await s.platform.db.query('SELECT 1 FROM basalt.auth_identities WHERE subject = $1', [
        `sub-${victim}`,
      ]);
      expect(linked.rows).toHaveLength(0);
    }
    // The provider vouches for it: the mailbox is proven, the account is the victim's, the attacker's password is gone.
    idp.as({ sub: `sub-${victim}`, email: victim, email_verified: true });
    const w = await walk(s, 'test', BACK);
    const taken = expectA(await exchange(fragment(w.final.location).get('code')!), 200);
    expect(taken.user).toMatchObject({ id: attacker.body.data.user.id, email_verified: true });
    expectAError(
      await call(s, { path: 'login', body: { email: victim, password: PASSWORD } }),
      401,
      'invalid_credentials',
    );
    expectAError(
      await call(s, { method: 'GET', path: 'me', token: attacker.body.data.access_token }),
      401,
      'session_revoked',
    );

    // A verified account, but the provider does not vouch for the address: refused too.
    const owner = email('owner');
    await markVerified(s, (await registerUser(s, { email: owner })).body.data.user.id);
    idp.as({ sub: `sub-${owner}`, email: owner, email_verified: false });
    expect(fragment((await walk(s, 'test', BACK)).final.location).get('error')).toBe('email_not_verified');
    // Both verified: linked to the existing account, which keeps its password.
    idp.as({ sub: `sub-${owner}`, email: owner, email_verified: true });
    const ok = await walk(s, 'test', BACK);
    const r = await exchange(fragment(ok.final.location).get('code')!);
    expectA(r, 200);
    expect(r.body.data.user.email).toBe(owner);
    expectA(await call(s, { path: 'login', body: { email: owner, password: PASSWORD } }), 200);
  });

  test('state: missing, replayed, from another browser, or for another provider is refused', async () => {
    idp.as({ sub: 'state-user', email: email('state'), email_verified: true });
    expectAError(await s.req('GET', '/api/v1/auth/oauth/test/callback?code=x'), 400, 'invalid_state');
    expectAError(await s.req('GET', '/api/v1/auth/oauth/test/callback?code=x&state=forged'), 400, 'invalid_state');
    const w = await walk(s, 'test', BACK);
    expect(fragment(w.final.location).get('code')).toBeTruthy();
    // The same callback URL again: the flow was spent.
    const replay = await hop(w.toCallback, { cookie: w.cookie });
    expect(replay.status).toBe(400);
    expect(JSON.parse(replay.body).error.code).toBe('invalid_state');
    // Login CSRF: the callback reaches a browser without the binding cookie, or with another one.
    const other = await walk(s, 'test', BACK, { cookie: '' });
    expect(other.final.location).toBe(`${BACK}#error=invalid_state`);
    const wrong = await walk(s, 'test', BACK, { cookie: `basalt_oauth=${'A'.repeat(43)}` });
    expect(wrong.final.location).toBe(`${BACK}#error=invalid_state`);
    // A state started for one provider, delivered to another's callback.
    const start = await hop(`${s.publicUrl}/api/v1/auth/oauth/test/start?redirect_to=${encodeURIComponent(BACK)}`);
    const atIdp = await hop(start.location);
    const swapped = atIdp.location.replace('/oauth/test/callback', '/oauth/github/callback');
    const r = await hop(swapped, { cookie: start.setCookie!.split(';')[0]! });
    expect(r.location).toBe(`${BACK}#error=invalid_state`);
  });

  test('redirect_to must be on the allow-list (origin, or origin and path prefix)', async () => {
    const start = (to: string) =>
      s.req('GET', `/api/v1/auth/oauth/test/start?redirect_to=${encodeURIComponent(to)}`, { redirect: 'manual' });
    for (const bad of [
      'https://evil.example.com/auth/done',
      `${APP}/other`,
      `${APP}/authx`,
      `${APP}/auth/../admin`,
      `${APP}/auth/%2e%2e/admin`,
      'https://app.example.com@evil.example.com/auth/',
      `https://user:pw@app.example.com/auth/`,
      'javascript:alert(1)//https://app.example.com/auth/',
      'http://app.example.com/auth/done',
      '/auth/done',
      'http://localhost:3001/',
    ])
      expectAError(await start(bad), 400, 'invalid_redirect');
    for (const good of [`${APP}/auth/`, `${APP}/auth/done?x=1`, 'http://localhost:3000/anything'])
      expect([good, (await start(good)).status]).toEqual([good, 302]);
    expectAError(
      await s.req('GET', `/api/v1/auth/oauth/nope/start?redirect_to=${encodeURIComponent(BACK)}`),
      404,
      'provider_not_found',
    );
  });

  test('the provider refusing, or an ID token that fails a check, ends in #error and no account', async () => {
    idp.denyNext();
    expect(fragment((await walk(s, 'test', BACK)).final.location).get('error')).toBe('access_denied');
    const tampered: [string, (c: Record<string, unknown>) => void][] = [
      ['nonce', (c) => (c.nonce = 'another-nonce')],
      ['aud', (c) => (c.aud = 'another-client')],
      ['iss', (c) => (c.iss = 'https://evil.example.com')],
      ['exp', (c) => (c.exp = Math.floor(Date.now() / 1000) - 3600)],
    ];
    for (const [what, fn] of tampered) {
      const address = email(`bad-${what}`);
      idp.as({ sub: `bad-${what}`, email: address, email_verified: true });
      idp.tamperNext(fn);
      const w = await walk(s, 'test', BACK);
      expect([what, fragment(w.final.location).get('error')]).toEqual([what, 'provider_error']);
      // No account was made: the address is still free to register.
      expect((await registerUser(s, { email: address })).status).toBe(201);
    }
  });

  test('GitHub-style plain OAuth2: the primary address with its verified flag', async () => {
    const address = email('gh');
    idp.github(4242, [
      { email: 'other@example.com', primary: false, verified: true },
      { email: address, primary: true, verified: true },
    ]);
    const w = await walk(s, 'github', BACK);
    const r = await exchange(fragment(w.final.location).get('code')!);
    expectA(
      r,
      200,
      expect.objectContaining({ user: expect.objectContaining({ email: address, email_verified: true }) }),
    );
    // An unverified primary address cannot take over an existing account.
    const taken = email('gh-taken');
    await markVerified(s, (await registerUser(s, { email: taken })).body.data.user.id);
    idp.github(4343, [{ email: taken, primary: true, verified: false }]);
    expect(fragment((await walk(s, 'github', BACK)).final.location).get('error')).toBe('email_not_verified');
  });

  test('api_key_required mode: the browser redirects need no key (a navigation cannot send one); the exchange does', async () => {
    await s.settings.set('web.public_api_access_mode', 'api_key_required');
    try {
      idp.as({ sub: 'keyless', email: email('keyless'), email_verified: true });
      const w = await walk(s, 'test', BACK);
      const code = fragment(w.final.location).get('code')!;
      expect(code).toBeTruthy();
      expectAError(await exchange(code), 401, 'api_key_required');
      expectAError(await call(s, { path: 'otp/request', body: { email: email() } }), 401, 'api_key_required');
      expectAError(
        await call(s, { path: 'mfa/verify', body: { mfa_token: 'x', code: '123456' } }),
        401,
        'api_key_required',
      );
    } finally {
      await s.settings.unset('web.public_api_access_mode');
    }
  });

  test('a signed-in user links and unlinks providers, never the last way to sign in', async () => {
    // A passwordless account made by the provider.
    const address = email('links');
    idp.as({ sub: `links-${address}`, email: address, email_verified: true });
    const first = await exchange(fragment((await walk(s, 'test', BACK)).final.location).get('code')!);
    const token = first.body.data.access_token;
    const methods = await call(s, { method: 'GET', path: 'identities', token });
    expectA(
      methods,
      200,
      expect.objectContaining({ has_password: false, totp_enabled: false, recovery_codes_left: 0 }),
    );
    expect(methods.body.data.identities).toEqual([
      expect.objectContaining({ provider: 'test', email: address, email_verified: true }),
    ]);
    const only = methods.body.data.identities[0].id;
    expectAError(await call(s, { method: 'DELETE', path: `identities/${only}`, token }), 409, 'last_sign_in_method');

    // Link GitHub: a ticket URL, the same flow, back with #linked.
    idp.github(5151, [{ email: 'whatever@example.com', primary: true, verified: false }]);
    const link = await call(s, { path: 'oauth/github/link', token, body: { redirect_to: BACK } });
    expectA(link, 200, { url: expect.stringContaining('/api/v1/auth/oauth/github/start?') });
    expect(link.body.data.url).not.toMatch(/eyJ/); // a ticket, never the access token
    const ticket = new URL(link.body.data.url).searchParams.get('link')!;
    const w = await walk(s, 'github', BACK, { link: ticket });
    // Confirmed on the callback's page first (linking CSRF: ownership.test.ts).
    expect((await confirmLink(w)).location).toBe(`${BACK}#linked=github`);
    // The ticket was spent by that start.
    expectAError(
      await s.req('GET', `/api/v1/auth/oauth/github/start?redirect_to=${encodeURIComponent(BACK)}&link=${ticket}`, {
        redirect: 'manual',
      }),
      400,
      'invalid_link_ticket',
    );
    const after = await call(s, { method: 'GET', path: 'identities', token });
    expect(after.body.data.identities.map((i: { provider: string }) => i.provider).sort()).toEqual(['github', 'test']);
    // Two ways now: one may go, then the other is the last.
    expectA(await call(s, { method: 'DELETE', path: `identities/${only}`, token }), 200);
    const gh = (await call(s, { method: 'GET', path: 'identities', token })).body.data.identities[0].id;
    expectAError(await call(s, { method: 'DELETE', path: `identities/${gh}`, token }), 409, 'last_sign_in_method');
    expectAError(await call(s, { method: 'DELETE', path: 'identities/not-a-uuid', token }), 404, 'identity_not_found');

    // A provider account already linked to someone else cannot be linked again.
    const other = await signInUser(s);
    const link2 = await call(s, { path: 'oauth/github/link', token: other.access_token, body: { redirect_to: BACK } });
    const w2 = await walk(s, 'github', BACK, { link: new URL(link2.body.data.url).searchParams.get('link')! });
    expect(w2.final.location).toBe(`${BACK}#error=identity_taken`);
    // With a password, the user may unlink every provider.
    expectAError(
      await call(s, {
        path: 'oauth/github/link',
        token: other.access_token,
        body: { redirect_to: 'https://evil.example.com/' },
      }),
      400,
      'invalid_redirect',
    );
  });
});

describe.each(ENGINES)('provider check with the public API on its own listener on %s', (engine) => {
  let s: TestServer;
  let idp: TestProvider;
  beforeAll(async () => {
    idp = await startProvider();
    s = await startAuthServer(engine, { env: { BASALT_WEB_PUBLIC_API_SEPARATE: 'true' } });
    await s.settings.set('auth.oauth_providers', idp.settings(['test']));
    await s.settings.set('auth.redirect_allowlist', [`${APP}/auth/`]);
  }, 180_000);
  afterAll(async () => {
    await s?.stop();
    await idp?.stop();
  });

  test("without web.public_base_url the check says the callback is not known instead of giving the panel's origin", async () => {
    expect(s.publicUrl).not.toBe(s.url);
    // The start route, on the public listener, registers its own origin's callback.
    expect(await startRedirectUri(s, 'test')).toBe(`${s.publicUrl}/api/v1/auth/oauth/test/callback`);
    // The check runs on the main listener, which is not where browsers reach the public API.
    const check = await providerCheck(s, 'test');
    expect(check).toMatchObject({
      ok: false,
      redirect_uri: null,
      authorization_url: null,
      problem: expect.stringMatching(/^authorization_url: no public base URL known: .*web\.public_base_url/),
    });
    expect(check.checks.map((c: { step: string; ok: boolean | null }) => [c.step, c.ok])).toEqual([
      ['discovery', true],
      ['jwks', true],
      ['authorization_url', false],
      ['token_endpoint', check.checks[3].ok],
    ]);
    expect(check.checks[3].ok).not.toBe(false); // the client is still tried, without a redirect_uri
    expect(JSON.stringify(check)).not.toContain(s.url);
    await s.settings.set('web.public_base_url', 'https://api.example.com');
    try {
      const callback = 'https://api.example.com/api/v1/auth/oauth/test/callback';
      expect(await providerCheck(s, 'test')).toMatchObject({ ok: true, redirect_uri: callback, problem: null });
      expect(await startRedirectUri(s, 'test')).toBe(callback);
    } finally {
      await s.settings.unset('web.public_base_url');
    }
  });
});
