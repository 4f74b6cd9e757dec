/**
 * Provider sign-in and linking (docs/auth.md, OAuth2 and OpenID Connect): the flow row
 * and browser binding at start, the callback's checks, the account rule with its
 * pre-hijacking defence, and the one-time exchange code. No HTTP here: routes hand in
 * the cookie and query, and get back where to send the browser.
 *
 * No token ever travels in a URL: the callback sends the browser back with a 60-second
 * single-use `#code=` in the fragment (never sent to a server, not in Referer), which the
 * front-end trades for tokens with a POST.
 */
import type { SettingSuffix, SettingValue } from '../../config/schema';
import type { Platform } from '../../platform';
import { PgError } from '../../db/engine';
import { AuthErrors } from './errors';
import { SignInErrors } from './sign-in-errors';
import type { AuthenticatedUser, ClientMeta, SignInCore, SignInResult } from './sign-in-core';
import { authorizationUrl, finishFlow, ProviderDenied, providerNamed, type Provider } from './oidc';
import { identityOwner, issueOneTimeCode, linkIdentity, spendOneTimeCode, type ProviderAccount } from './identities';
import { mixedScriptAddress, userByEmail, userById, type UserRow } from './users';
import { insertPasswordlessUser } from './sign-in';
import { mailboxProven } from './ownership';
import { limitPerMinute } from './rate-limit';
import { secretMatches, sha256 } from './tokens';
import { redirectProblem } from './redirects';

/** The cookie binding a flow to the browser that started it. */
export const OAUTH_COOKIE = 'basalt_oauth';
/** The cookie binding a linking flow, and its confirmation, to the browser that started it. */
export const LINK_COOKIE = 'basalt_link';
/** How long a started flow (and its cookie) lives. */
export const FLOW_SECONDS = 10 * 60;

/** Codes a callback may put in `#error=` (docs/auth.md lists what each means). */
export const CALLBACK_ERRORS = [
  'access_denied',
  'invalid_state',
  'provider_error',
  'provider_not_found',
  'account_exists',
  'identity_taken',
  'email_required',
  'email_not_verified',
  'registration_closed',
  'account_disabled',
  'email_mixed_scripts',
] as const;
type CallbackError = (typeof CALLBACK_ERRORS)[number];

const BINDING = /^[A-Za-z0-9_-]{43}$/;
/** Whether `presented` is the cookie whose SHA-256 is `hash` (constant time). */
const bound = (presented: string | undefined, hash: Uint8Array | null): boolean =>
  !!presented && !!hash && BINDING.test(presented) && secretMatches(presented, hash);
const randomBinding = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url');
/** The id of a link confirmation (the confirm form's token): 128 random bits. */
const CONFIRM_ID = /^[A-Za-z0-9_-]{22}$/;

/** `target` with its fragment replaced by `params` (the front-end reads location.hash). */
function withFragment(target: string, params: Record<string, string>): string {
  const u = new URL(target);
  u.hash = new URLSearchParams(params).toString();
  return u.href;
}

interface FlowRow {
  binding_hash: Uint8Array;
  provider: string;
  code_verifier: string;
  nonce: string;
  redirect_to: string;
  redirect_uri: string;
  link_user_id: string | null;
  link_binding_hash: Uint8Array | null;
}

/** What the callback's confirmation page shows before a provider account is linked. */
export interface LinkConfirmation {
  /** The confirm form's token: the id of the waiting confirmation (useless without the link cookie). */
  token: string;
  provider: string;
  /** The provider account's address, as the provider gave it (null: none). */
  providerEmail: string | null;
  /** The address of the account it would be linked to. */
  accountEmail: string;
  /** Where the browser goes after (the form may post there: the page's CSP names its origin). */
  redirectTo: string;
}

export class OAuthFlows {
  constructor(
    private p: Platform,
    private auth: SignInCore,
  ) {}

  private setting<K extends SettingSuffix<'auth'>>(key: K): SettingValue<`auth.${K}`> {
    return this.p.settings.get(`auth.${key}`);
  }

  /** The configured provider `name` (404 `provider_not_found` otherwise). */
  provider(name: string): Provider {
    const p = providerNamed(this.setting('oauth_providers'), name);
    if (!p) throw SignInErrors.providerNotFound();
    return p;
  }

  /** Names of the configured providers (for front-ends: runtime config and the panel). */
  providerNames(): string[] {
    return this.setting('oauth_providers').map((p) => p.name);
  }

  private checkRedirect(target: string): void {
    const problem = redirectProblem(this.setting('redirect_allowlist'), target);
    if (problem) throw SignInErrors.invalidRedirect(problem);
  }

  /**
   * Start a flow: the provider's authorization URL to send the browser to, and the cookie
   * value binding the flow to this browser (the browser's existing one when it has one,
   * so flows started in two tabs both complete). `link` is a signed-in user's ticket.
   */
  async start(
    name: string,
    input: { redirectTo: string; link?: string; binding?: string; callbackUrl: string },
  ): Promise<{ location: string; binding: string; linkBinding?: string }> {
    const provider = this.provider(name);
    this.checkRedirect(input.redirectTo);
    let linkUserId: string | null = null;
    if (input.link !== undefined) {
      const ticket = await spendOneTimeCode(this.p.db, 'link', input.link);
      if (!ticket) throw SignInErrors.invalidLinkTicket();
      linkUserId = ticket.userId;
    }
    const binding = input.binding && BINDING.test(input.binding) ? input.binding : randomBinding();
    // Linking: a cookie of its own, new for each flow, which its callback and confirmation require.
    const linkBinding = linkUserId ? randomBinding() : undefined;
    let started: Awaited<ReturnType<typeof authorizationUrl>>;
    try {
      started = await authorizationUrl(provider, input.callbackUrl);
    } catch (e) {
      this.p.log.warn('sign-in provider unavailable', { provider: name, cause: e });
      throw SignInErrors.providerUnavailable();
    }
    const { secrets } = started;
    await this.p.db.query(
      `INSERT INTO basalt.auth_oauth_flows
         (state_hash, binding_hash, provider, code_verifier, nonce, redirect_to, redirect_uri, link_user_id,
          link_binding_hash, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now() + make_interval(secs => $10))`,
      [
        sha256(secrets.state),
        sha256(binding),
        name,
        secrets.codeVerifier,
        secrets.nonce,
        input.redirectTo,
        input.callbackUrl,
        linkUserId,
        linkBinding ? sha256(linkBinding) : null,
        FLOW_SECONDS,
      ],
    );
    return { location: started.url, binding, ...(linkBinding ? { linkBinding } : {}) };
  }

  /**
   * The provider's callback → where to send the browser: `redirect_to#code=…` (sign-in),
   * `#linked=<provider>` (linking) or `#error=<code>`. The flow is spent by the same
   * statement that finds it (single use). A state that names no live flow leaves no
   * trusted place to go: 400 `invalid_state`.
   */
  async callback(
    name: string,
    query: URLSearchParams,
    binding: string | undefined,
    linkBinding?: string,
  ): Promise<string | LinkConfirmation> {
    const state = query.get('state');
    if (!state || state.length > 200) throw SignInErrors.invalidState();
    const { rows } = await this.p.db.query<FlowRow>(
      `DELETE FROM basalt.auth_oauth_flows WHERE state_hash = $1 AND expires_at > now()
       RETURNING binding_hash, provider, code_verifier, nonce, redirect_to, redirect_uri, link_user_id, link_binding_hash`,
      [sha256(state)],
    );
    const flow = rows[0];
    if (!flow) throw SignInErrors.invalidState();
    const back = (params: Record<string, string>) => withFragment(flow.redirect_to, params);
    const fail = (error: CallbackError) => back({ error });
    // Another browser's callback (login CSRF: an attacker's code pushed to the victim) fails here.
    if (!bound(binding, flow.binding_hash) || flow.provider !== name) return fail('invalid_state');
    // Linking: also the link cookie of this very flow (a link URL opened in another browser never gets here).
    if (flow.link_user_id && !bound(linkBinding, flow.link_binding_hash)) return fail('invalid_state');
    const provider = providerNamed(this.setting('oauth_providers'), name);
    if (!provider) return fail('provider_not_found');
    let account: ProviderAccount;
    try {
      account = await finishFlow(provider, query, flow.redirect_uri, {
        state,
        nonce: flow.nonce,
        codeVerifier: flow.code_verifier,
      });
    } catch (e) {
      if (e instanceof ProviderDenied) return fail(e.error === 'access_denied' ? 'access_denied' : 'provider_error');
      this.p.log.warn('sign-in provider callback failed', { provider: name, cause: e });
      return fail('provider_error');
    }
    if (flow.link_user_id) return this.toConfirm(flow, account, linkBinding!);
    const user = await this.accountFor(account);
    if (typeof user === 'string') return fail(user);
    const code = await issueOneTimeCode(this.p.db, 'exchange', user.id, ['oauth']);
    return back({ code });
  }

  /**
   * A linking callback's provider account, held for the signed-in user's confirmation on
   * the callback's page: a link URL made by someone else and opened by a signed-in victim
   * shows whose account it would join instead of joining it. Already linked to this user:
   * refreshed, nothing to confirm; to another user: `identity_taken`.
   */
  private async toConfirm(flow: FlowRow, a: ProviderAccount, linkBinding: string): Promise<string | LinkConfirmation> {
    const back = (params: Record<string, string>) => withFragment(flow.redirect_to, params);
    const owner = await identityOwner(this.p.db, a.provider, a.subject);
    if (owner && owner !== flow.link_user_id) return back({ error: 'identity_taken' });
    if (owner) {
      await linkIdentity(this.p.db, owner, a);
      return back({ linked: a.provider });
    }
    const user = await userById(this.p.db, flow.link_user_id!);
    if (!user) return back({ error: 'invalid_state' });
    const id = randomBinding().slice(0, 22);
    await this.p.db.query(
      `INSERT INTO basalt.auth_link_confirmations
         (token_hash, binding_hash, user_id, provider, subject, email, email_verified, redirect_to, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9))`,
      [
        sha256(id),
        sha256(linkBinding),
        user.id,
        a.provider,
        a.subject,
        a.email,
        a.emailVerified,
        flow.redirect_to,
        FLOW_SECONDS,
      ],
    );
    return {
      token: id,
      provider: a.provider,
      providerEmail: a.email,
      accountEmail: user.email,
      redirectTo: flow.redirect_to,
    };
  }

  /**
   * The confirmation page's answer → where to send the browser: `#linked=<provider>`,
   * `#error=access_denied` (declined) or `#error=identity_taken`. Needs the page's token
   * and the link cookie of the flow (SameSite=Lax: a cross-site form post arrives
   * without it); single use. Otherwise 400 `invalid_link_confirmation`.
   */
  async confirmLink(name: string, token: string, linkBinding: string | undefined, declined: boolean): Promise<string> {
    if (!CONFIRM_ID.test(token)) throw SignInErrors.invalidLinkConfirmation();
    const { rows } = await this.p.db.query<{
      binding_hash: Uint8Array;
      user_id: string;
      subject: string;
      email: string | null;
      email_verified: boolean;
      redirect_to: string;
    }>(
      `DELETE FROM basalt.auth_link_confirmations WHERE token_hash = $1 AND provider = $2 AND expires_at > now()
       RETURNING binding_hash, user_id, subject, email, email_verified, redirect_to`,
      [sha256(token), name],
    );
    const row = rows[0];
    if (!row || !bound(linkBinding, row.binding_hash)) throw SignInErrors.invalidLinkConfirmation();
    if (declined) return withFragment(row.redirect_to, { error: 'access_denied' });
    const account = { provider: name, subject: row.subject, email: row.email, emailVerified: row.email_verified };
    if (!(await linkIdentity(this.p.db, row.user_id, account)))
      return withFragment(row.redirect_to, { error: 'identity_taken' });
    return withFragment(row.redirect_to, { linked: name });
  }

  /**
   * The account a provider identity signs in to, or why none:
   * - a linked identity signs in to its user;
   * - an address the provider does not vouch for never creates or links an account
   *   (`email_not_verified`), whether or not an account has it;
   * - otherwise the account with the address is linked, or a new verified one made;
   * - a provider vouching for the account's own unverified address proves the mailbox:
   *   the first proof hands the account over (./ownership.ts), in the transaction that
   *   links the identity, so an attacker who registered the address beforehand loses it.
   */
  private async accountFor(a: ProviderAccount): Promise<UserRow | CallbackError> {
    let user: UserRow | undefined;
    const owner = await identityOwner(this.p.db, a.provider, a.subject);
    if (owner) {
      user = await userById(this.p.db, owner);
      if (!user) return 'provider_error';
    } else {
      if (!a.email) return 'email_required';
      if (!a.emailVerified) return 'email_not_verified';
      user = await userByEmail(this.p.db, a.email);
      if (!user) {
        if (!this.setting('registration_open')) return 'registration_closed';
        if (mixedScriptAddress(a.email)) return 'email_mixed_scripts';
        try {
          user = await insertPasswordlessUser(this.p.db, a.email, true);
        } catch (e) {
          if (e instanceof PgError && e.code === '23505') return 'account_exists'; // registered meanwhile
          throw e;
        }
      }
    }
    if (user.disabled_at) return 'account_disabled';
    const found = user;
    const proves = !found.email_verified_at && a.emailVerified && a.email === found.email;
    const linked = await this.p.db.transaction(async (tx) => {
      if (proves) user = (await mailboxProven(tx, this.auth.sessions, found.id))?.user;
      // Links it, or refreshes what the provider says now (shown to the user).
      return user !== undefined && (await linkIdentity(tx, user.id, a));
    });
    if (!user) return 'provider_error';
    if (!linked) return 'identity_taken';
    if (this.setting('email_verification_required') && !user.email_verified_at) return 'email_not_verified';
    return user;
  }

  /** Trade the callback's one-time code for the sign-in (tokens, or the MFA step). */
  async exchange(code: string, meta: ClientMeta): Promise<SignInResult> {
    await limitPerMinute(
      this.p.db,
      `exchange_ip:${meta.ip}`,
      this.setting('rate_limit_token_per_ip'),
      AuthErrors.rateLimited,
    );
    const spent = await spendOneTimeCode(this.p.db, 'exchange', code);
    if (!spent) throw SignInErrors.invalidExchangeCode();
    const row = await userById(this.p.db, spent.userId);
    if (!row) throw SignInErrors.invalidExchangeCode();
    if (row.disabled_at) throw AuthErrors.accountDisabled();
    return this.auth.signedIn(row, spent.amr, meta);
  }

  /** A signed-in user's ticket (60 s, single use) to start linking `name`; checked like a sign-in start. */
  async linkTicket(user: AuthenticatedUser, name: string, redirectTo: string): Promise<string> {
    this.provider(name);
    this.checkRedirect(redirectTo);
    return issueOneTimeCode(this.p.db, 'link', user.userId, []);
  }

  /** Drop flows and codes that expired (housekeeping). */
  async prune(): Promise<void> {
    await this.p.db.query('DELETE FROM basalt.auth_oauth_flows WHERE expires_at < now()');
    await this.p.db.query('DELETE FROM basalt.auth_link_confirmations WHERE expires_at < now()');
    await this.p.db.query('DELETE FROM basalt.auth_exchange_codes WHERE expires_at < now()');
    await this.p.db.query('DELETE FROM basalt.auth_mfa_challenges WHERE expires_at < now()');
  }
}
