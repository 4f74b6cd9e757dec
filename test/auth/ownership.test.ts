/**
 * Account ownership (docs/auth.md, Account ownership), over HTTP against a real SMTP sink
 * and a real OpenID Connect provider (test/auth/provider.ts): pre-hijacking — an attacker
 * registers the victim's address (unverified) with a password, or links a provider account
 * to it — ends when the victim first proves the mailbox (an e-mail code, a reset link, the
 * verification link, a provider vouching for the address): the attacker's sessions,
 * refresh token, password and identities stop working and the victim's session lives. A
 * provider address the provider does not vouch for never creates or links an account.
 * Linking is bound to the browser that started it and confirmed on our page (linking CSRF).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import type { SmtpSink } from '../helpers/smtp-sink';
import { expectA, expectAError } from '../helpers/envelopes';
import { eventually } from '../helpers/wait';
import { registerUser, signInUser, type SignedInUser } from '../helpers/users';
import {
  call,
  email,
  mailedToken,
  PASSWORD,
  resetToken,
  startWithMailAndProvider,
  type MailAndProvider,
} from './support';
import { confirmLink, fragment, walk, type TestProvider } from './provider';

const APP = 'https://app.example.com';
const BACK = `${APP}/auth/done`;

describe.each(ENGINES)('account ownership on %s', (engine) => {
  let world: MailAndProvider;
  let s: TestServer;
  let sink: SmtpSink;
  let idp: TestProvider;
  beforeAll(async () => {
    // No web.public_base_url: the provider's callback is this server's own; mailed links go to its loopback origin.
    world = await startWithMailAndProvider(engine, { providers: ['test', 'github'], allowlist: [`${APP}/auth/`] });
    ({ s, sink, idp } = world);
  }, 180_000);
  afterAll(() => world.stop());

  const exchange = (code: string) => call(s, { path: 'oauth/exchange', body: { code } });
  const me = (token: string) => call(s, { method: 'GET', path: 'me', token });
  const login = (address: string) => call(s, { path: 'login', body: { email: address, password: PASSWORD } });
  const identities = async (token: string) =>
    expectA(await call(s, { method: 'GET', path: 'identities', token }), 200).identities as { provider: string }[];

  /** The n-th sign-in code mailed to `to`. */
  async function mailedCode(to: string, nth = 1): Promise<string> {
    const mails = await eventually(
      () => sink.messages.filter((m) => m.to.includes(to) && m.subject.includes('sign-in code')),
      { until: (m) => m.length >= nth, what: `sign-in code mail #${nth} to ${to}` },
    );
    return /\b(\d{6})\b/.exec(mails[nth - 1]!.text)![1]!;
  }

  /** The victim signs in with an e-mail code: the login answer. */
  async function codeSignIn(address: string, nth = 1) {
    expectA(await call(s, { path: 'otp/request', body: { email: address } }), 202);
    return expectA(
      await call(s, { path: 'otp/verify', body: { email: address, code: await mailedCode(address, nth) } }),
      200,
    );
  }

  /** What the attacker holds after registering the victim's address: two sessions (register's and a login's). */
  async function preHijack(address: string): Promise<{ first: SignedInUser; second: SignedInUser }> {
    const first = await signInUser(s, { email: address });
    const second = await signInUser(s, { email: address, register: false });
    return { first, second };
  }

  /** Every credential the attacker kept is refused; the victim's session lives. */
  async function attackerLockedOut(held: { first: SignedInUser; second: SignedInUser }, victimToken: string) {
    for (const u of [held.first, held.second]) {
      expectAError(await me(u.access_token), 401, 'session_revoked');
      expectAError(
        await call(s, { path: 'refresh', body: { refresh_token: u.refresh_token } }),
        401,
        'session_revoked',
      );
    }
    expectAError(await login(held.first.email), 401, 'invalid_credentials');
    expectA(
      await me(victimToken),
      200,
      expect.objectContaining({ user: expect.objectContaining({ email_verified: true }) }),
    );
  }

  test("an e-mail code hands an account registered by someone else to the mailbox's owner", async () => {
    const victim = email('code-victim');
    const held = await preHijack(victim);
    const signedIn = await codeSignIn(victim);
    expect(signedIn.user).toMatchObject({ id: held.first.user.id, email_verified: true });
    await attackerLockedOut(held, signedIn.access_token);
    expect(
      expectA(await call(s, { method: 'GET', path: 'identities', token: signedIn.access_token }), 200),
    ).toMatchObject({
      has_password: false,
    });
    // The owner signs in again by code; the proof was the first one only, so that session is not ended.
    const again = await codeSignIn(victim, 2);
    expectA(await me(signedIn.access_token), 200);
    expectA(await me(again.access_token), 200);
  });

  test('also with auth.email_verification_required: the password set before the proof no longer signs in', async () => {
    await s.settings.set('auth.email_verification_required', true);
    try {
      const victim = email('required-victim');
      expect((await registerUser(s, { email: victim })).body.data.access_token).toBeUndefined();
      expectAError(await login(victim), 403, 'email_not_verified');
      const signedIn = await codeSignIn(victim);
      expectAError(await login(victim), 401, 'invalid_credentials');
      expectA(await me(signedIn.access_token), 200);
    } finally {
      await s.settings.unset('auth.email_verification_required');
    }
  });

  test('a reset link hands the account over too: sessions end, and identities linked while unverified are unlinked', async () => {
    const victim = email('reset-victim');
    const held = await preHijack(victim);
    // The attacker links their own provider account (it vouches for the attacker's own address).
    const attackerSub = `attacker-${victim}`;
    idp.as({ sub: attackerSub, email: email('attacker'), email_verified: true });
    const link = await call(s, {
      path: 'oauth/test/link',
      token: held.first.access_token,
      body: { redirect_to: BACK },
    });
    const w = await walk(s, 'test', BACK, { link: new URL(expectA(link, 200).url).searchParams.get('link')! });
    expect(fragment((await confirmLink(w)).location).get('linked')).toBe('test');
    expect((await identities(held.first.access_token)).map((i) => i.provider)).toEqual(['test']);
    // The victim resets the password through the mailed link.
    const token = await resetToken(s, sink, { email: victim });
    expectA(await call(s, { path: 'password/reset', body: { token, password: 'the owner passphrase' } }), 200);
    const owner = expectA(
      await call(s, { path: 'login', body: { email: victim, password: 'the owner passphrase' } }),
      200,
    );
    await attackerLockedOut(held, owner.access_token);
    expect(await identities(owner.access_token)).toEqual([]);
    // The attacker's provider sign-in no longer opens the victim's account.
    const back = await walk(s, 'test', BACK);
    const code = fragment(back.final.location).get('code');
    const attackerIn = code ? expectA(await exchange(code), 200) : undefined;
    expect(attackerIn?.user.id).not.toBe(owner.user.id);
  });

  test('the verification link without proof of the account hands it over; with the access token or the password it does not', async () => {
    // Someone else registered the address: the owner of the mailbox confirms it from the mail.
    const victim = email('link-victim');
    const held = await preHijack(victim);
    const { token } = await mailedToken(sink, victim, 'verify-email');
    expectA(await call(s, { path: 'verify-email', body: { token } }), 200);
    for (const u of [held.first, held.second]) expectAError(await me(u.access_token), 401, 'session_revoked');
    expectAError(await login(victim), 401, 'invalid_credentials');

    // The registrant confirms from the signed-in front-end: password and session stay.
    const mine = await signInUser(s, { email: email('link-mine') });
    const t1 = (await mailedToken(sink, mine.email, 'verify-email')).token;
    expectA(await call(s, { path: 'verify-email', body: { token: t1 }, token: mine.access_token }), 200);
    expectA(
      await me(mine.access_token),
      200,
      expect.objectContaining({ user: expect.objectContaining({ email_verified: true }) }),
    );
    expectA(await login(mine.email), 200);

    // Or with the password (auth.email_verification_required gives no session before it); a wrong one spends nothing.
    const other = email('link-password');
    await registerUser(s, { email: other });
    const t2 = (await mailedToken(sink, other, 'verify-email')).token;
    expectAError(
      await call(s, { path: 'verify-email', body: { token: t2, password: 'not the password' } }),
      401,
      'invalid_credentials',
    );
    expectA(await call(s, { path: 'verify-email', body: { token: t2, password: PASSWORD } }), 200);
    expectA(await login(other), 200);
  });

  test('a provider that does not vouch for the address never creates or links an account', async () => {
    // No account yet: none is made (and none would be with auth.email_verification_required off, as here).
    const fresh = email('unvouched');
    idp.as({ sub: `sub-${fresh}`, email: fresh, email_verified: false });
    const w = await walk(s, 'test', BACK);
    expect(fragment(w.final.location).get('error')).toBe('email_not_verified');
    expect((await registerUser(s, { email: fresh })).status).toBe(201); // the address is still free
    // An account has the address: not linked either, whether or not that account is verified.
    const victim = await codeSignIn(email('unvouched-owner'));
    idp.as({ sub: `sub2-${fresh}`, email: victim.user.email, email_verified: false });
    expect(fragment((await walk(s, 'test', BACK)).final.location).get('error')).toBe('email_not_verified');
    expect(await identities(victim.access_token)).toEqual([]);
    // GitHub's unverified primary address alike.
    idp.github(7777, [{ email: victim.user.email, primary: true, verified: false }]);
    expect(fragment((await walk(s, 'github', BACK)).final.location).get('error')).toBe('email_not_verified');
  });

  test("a provider vouching for the address proves the mailbox: the attacker's unverified account becomes the owner's", async () => {
    const victim = email('idp-victim');
    const held = await preHijack(victim);
    idp.as({ sub: `owner-${victim}`, email: victim, email_verified: true });
    const w = await walk(s, 'test', BACK);
    const signedIn = expectA(await exchange(fragment(w.final.location).get('code')!), 200);
    expect(signedIn.user).toMatchObject({ id: held.first.user.id, email_verified: true });
    await attackerLockedOut(held, signedIn.access_token);
    expect((await identities(signedIn.access_token)).map((i) => i.provider)).toEqual(['test']);
  });

  test('linking CSRF: a link URL opened in another browser is refused; in the same browser it waits for a confirmation on our page', async () => {
    const attacker = await signInUser(s, { email: email('csrf-attacker') });
    const victimAddress = email('csrf-victim');
    idp.github(8800, [{ email: victimAddress, primary: true, verified: true }]);
    const linkUrl = async () =>
      new URL(
        expectA(
          await call(s, { path: 'oauth/github/link', token: attacker.access_token, body: { redirect_to: BACK } }),
          200,
        ).url,
      ).searchParams.get('link')!;
    // The victim's browser opens the attacker's link URL: the page names the attacker's account, nothing is linked yet.
    const w = await walk(s, 'github', BACK, { link: await linkUrl() });
    expect(w.final.status).toBe(200);
    expect(w.final.headers.get('content-type')).toStartWith('text/html');
    expect(w.final.body).toContain(`Link github account ${victimAddress} to ${attacker.email}?`);
    expect(w.final.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(await identities(attacker.access_token)).toEqual([]);
    // The link cookie: HttpOnly, SameSite=Lax, scoped to the callback.
    const linkCookie = w.start.setCookies.find((c) => c.startsWith('basalt_link='))!;
    expect(linkCookie).toMatch(/; Path=\/api\/v1\/auth\/oauth\/github\/callback; Max-Age=600; HttpOnly; SameSite=Lax$/);
    // A cross-site form post (no SameSite=Lax cookie) with the page's token: refused, still nothing linked.
    expectAErrorHop(
      await confirmLink(w, {
        cookie: w.cookie
          .split('; ')
          .filter((c) => !c.startsWith('basalt_link='))
          .join('; '),
      }),
    );
    expect(await identities(attacker.access_token)).toEqual([]);
    // The callback pushed into a browser that has the flow cookie but not the link cookie.
    const w2 = await walk(s, 'github', BACK, { link: await linkUrl(), cookie: '' });
    expect(fragment(w2.final.location).get('error')).toBe('invalid_state');
    // Declining links nothing.
    const w3 = await walk(s, 'github', BACK, { link: await linkUrl() });
    expect(fragment((await confirmLink(w3, { decline: true })).location).get('error')).toBe('access_denied');
    expect(await identities(attacker.access_token)).toEqual([]);
    // The user who asked confirms in their own browser: linked (303 back), the cookie cleared, the page's token spent.
    const w4 = await walk(s, 'github', BACK, { link: await linkUrl() });
    const done = await confirmLink(w4);
    expect([done.status, done.location]).toEqual([303, `${BACK}#linked=github`]);
    expect(done.setCookies.some((c) => c.startsWith('basalt_link=;') && c.includes('Max-Age=0'))).toBe(true);
    expect((await identities(attacker.access_token)).map((i) => i.provider)).toEqual(['github']);
    expectAErrorHop(await confirmLink(w4));
  });
});

/** The confirmation post refused: 400 `invalid_link_confirmation` in the auth area's envelope. */
function expectAErrorHop(r: { status: number; body: string }) {
  expect(r.status).toBe(400);
  expect(JSON.parse(r.body)).toMatchObject({ success: false, error: { code: 'invalid_link_confirmation' } });
}
