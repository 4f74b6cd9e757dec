/**
 * Public Auth (docs/auth.md): accounts, sessions and tokens, password reset and
 * e-mail verification, rate limits and lockout. No HTTP here: routes pass plain
 * values in and render what comes back; failures are AppErrors.
 */
import type { SettingSuffix, SettingValue } from '../../config/schema';
import type { Platform } from '../../platform';
import type { Logger } from '../../log';
import { getOrCreateSecret, SecretBox } from '../../db/secrets';
import { ConfigError } from '../../config/validate';
import { PgError, type Queryable } from '../../db/engine';
import { AuthErrors } from './errors';
import type { AppError } from '../../http/errors';
import { aalOf, accessTokens, type AccessTokens } from './jwt';
import { issueMfaChallenge, MFA_TOKEN_SECONDS, TOTP_BOX, totpEnabled } from './totp';
import { SessionStore, type Failure } from './sessions';
import { dummyHash, hashPassword, needsRehash, passwordProblem, verifyPassword } from './passwords';
import {
  ACCOUNT_LIMITS,
  accountBucketsPrefix,
  accountFromBucket,
  hit,
  limitPerMinute,
  pruneCounters,
  resetBuckets,
} from './rate-limit';
import { userLockout, type LockoutLimits, type LockState } from './lockout';
import {
  consumeActionToken,
  liveActionTokenUser,
  issueActionToken,
  pruneActionTokens,
  type Purpose,
} from './action-tokens';
import {
  checkEmail,
  insertUser,
  markVerified,
  mixedScriptAddress,
  publicUser,
  setPasswordHash,
  userByEmail,
  userById,
  type PublicUser,
  type UserRow,
} from './users';
import { sendActionMail } from './mailer';
import { mailboxProven } from './ownership';
import {
  countUsers,
  searchUsers,
  userDetail,
  userSessions,
  type AdminUserView,
  type UserSessionView,
} from './user-directory';
import type { MailService } from '../mail/service';
import { SignInMethods } from './sign-in';
import { OAuthFlows } from './oauth-flow';
import { pruneEmailCodes } from './email-codes';
import type { AuthenticatedUser, ClientMeta, SignInCore, SignInResult, TokenPair } from './sign-in-core';

export type { AuthenticatedUser, ClientMeta, SignInResult, TokenPair } from './sign-in-core';

/** Mails to one address per hour, whoever asks (stops inbox flooding from many IPs). */
const MAILS_PER_ADDRESS_PER_HOUR = 5;
const PRUNE_EVERY_MS = 15 * 60_000;

export class AuthService implements SignInCore {
  private pending = new Set<Promise<void>>();
  /** E-mail codes, the second factor, the user's identities (sign-in.ts). */
  methods!: SignInMethods;
  /** Provider sign-in and linking (oauth-flow.ts). */
  oauth!: OAuthFlows;

  constructor(
    private p: Platform,
    private tokens: AccessTokens,
    readonly sessions: SessionStore,
    private mail: MailService,
  ) {}

  private setting<K extends SettingSuffix<'auth'>>(key: K): SettingValue<`auth.${K}`> {
    return this.p.settings.get(`auth.${key}`);
  }

  /** Per-IP limit on submitting mailed tokens: guessing is hopeless, but each try costs a lookup (and formerly a hash). */
  private async limitTokenTries(ip: string): Promise<void> {
    await this.limit(`token_ip:${ip}`, this.setting('rate_limit_token_per_ip'));
  }

  private limit(bucket: string, perMinute: number): Promise<void> {
    return limitPerMinute(this.p.db, bucket, perMinute, (retryAfter) => AuthErrors.rateLimited(retryAfter));
  }

  /** The normalized address (docs/auth.md, E-mail addresses), or 422 naming `email`. */
  private checkEmail(raw: string): string {
    const r = checkEmail(raw);
    if (!r.ok) throw AuthErrors.field('email', r.problem);
    return r.email;
  }

  /** auth.lockout_threshold per (account, source), auth.lockout_backstop_threshold across sources (./lockout.ts). */
  lockoutLimits(): LockoutLimits {
    return {
      perSource: this.setting('lockout_threshold'),
      backstop: this.setting('lockout_backstop_threshold'),
      windowSeconds: this.setting('lockout_window_seconds'),
    };
  }

  /** Refuse a source locked out of `email` (or everyone, past the backstop): 429 `account_locked`. */
  async refuseLocked(email: string, ip: string): Promise<void> {
    const locked = await userLockout.lockedOut(this.p.db, email, ip);
    if (locked) throw AuthErrors.accountLocked(locked);
  }

  /** A wrong password, code or second factor from `ip` on `email` (known or not). */
  async countFailure(email: string, ip: string): Promise<void> {
    const l = await userLockout.recordFailure(this.p.db, email, ip, this.lockoutLimits());
    if (l.sourceLocked) this.p.log.warn('sign-in locked for one address after failed attempts', { ip });
    if (l.accountLocked)
      this.p.log.warn('sign-in locked for every address: too many failures from many addresses', { ip });
  }

  private checkNewPassword(field: string, password: string): void {
    const problem = passwordProblem(password, this.setting('password_min_length'));
    if (problem) throw AuthErrors.field(field, problem);
  }

  /** A new session signed in by `amr` (docs/auth.md, Second factor: the claims it gives access tokens). */
  async issue(userId: string, meta: ClientMeta, amr: readonly string[] = ['pwd']): Promise<TokenPair> {
    const { sessionId, refreshToken } = await this.sessions.create(this.p.db, userId, meta, amr);
    return this.pair(userId, sessionId, refreshToken, [...amr]);
  }

  /**
   * The end of every first factor (password, e-mail code, provider): the tokens, or, when
   * the user has a second factor, the MFA step and no tokens. Failures are cleared only
   * once the sign-in is complete, so repeating the password cannot reset the count of
   * wrong second-factor codes.
   */
  async signedIn(row: UserRow, amr: readonly string[], meta: ClientMeta): Promise<SignInResult> {
    if (await totpEnabled(this.p.db, row.id))
      return {
        mfa_required: true,
        mfa_token: await issueMfaChallenge(this.p.db, row.id, amr),
        expires_in: MFA_TOKEN_SECONDS,
      };
    await userLockout.clearSource(this.p.db, row.email, meta.ip);
    return { user: publicUser(row), ...(await this.issue(row.id, meta, amr)) };
  }

  private async pair(userId: string, sessionId: string, refreshToken: string, amr: string[]): Promise<TokenPair> {
    // Read once, so the token's `exp` and the `expires_in` beside it agree.
    const seconds = this.p.settings.get('auth.access_token_seconds');
    return {
      access_token: await this.tokens.sign({ sub: userId, sid: sessionId, amr, aal: aalOf(amr) }, seconds),
      token_type: 'Bearer',
      expires_in: seconds,
      refresh_token: refreshToken,
      refresh_expires_in: this.p.settings.get('auth.refresh_token_seconds'),
    };
  }

  /** Run mail work after the answer is sent, so its duration reveals nothing about the account. */
  background(work: () => Promise<void>): void {
    const job = work()
      .catch((e) => this.p.log.error('auth mail failed', { cause: e }))
      .finally(() => this.pending.delete(job));
    this.pending.add(job);
  }

  /** Wait for background mail work (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  async register(
    input: { email: string; password: string },
    meta: ClientMeta,
  ): Promise<{ user: PublicUser; verification_required: boolean } & Partial<TokenPair>> {
    if (!this.setting('registration_open')) throw AuthErrors.registrationClosed();
    await this.limit(`register_ip:${meta.ip}`, this.setting('rate_limit_register_per_ip'));
    const email = this.checkEmail(input.email);
    if (mixedScriptAddress(email)) throw AuthErrors.emailMixedScripts();
    this.checkNewPassword('password', input.password);
    const hash = await hashPassword(input.password);
    let row: UserRow;
    try {
      row = await insertUser(this.p.db, email, hash);
    } catch (e) {
      if (e instanceof PgError && e.code === '23505') throw AuthErrors.emailTaken();
      // The table's own check (migration 060) disagreeing with checkEmail: still the client's input, never a 500.
      if (e instanceof PgError && e.code === '23514')
        throw AuthErrors.field('email', 'must be an e-mail address like name@example.com');
      throw e;
    }
    if (this.mail.isConfigured()) {
      this.background(async () =>
        sendActionMail(
          this.p,
          this.mail,
          'verify_email',
          email,
          () => issueActionToken(this.p.db, row.id, email, 'verify_email'),
          meta.origin,
        ),
      );
    }
    const verification_required = this.setting('email_verification_required');
    const user = publicUser(row);
    if (verification_required) return { user, verification_required };
    return { user, verification_required, ...(await this.issue(row.id, meta)) };
  }

  /**
   * Order matters: the IP limit first (cheapest, protects everything after), then the
   * lock, then the per-account limit, then the password. Unknown addresses run the
   * same steps and verify against a dummy hash, so they cost what a wrong password costs.
   */
  async login(input: { email: string; password: string }, meta: ClientMeta): Promise<SignInResult> {
    await this.limit(`login_ip:${meta.ip}`, this.setting('rate_limit_login_per_ip'));
    const email = this.checkEmail(input.email);
    await this.refuseLocked(email, meta.ip);
    await this.limit(accountFromBucket('login_account', email, meta.ip), this.setting('rate_limit_login_per_account'));
    const row = await userByEmail(this.p.db, email);
    const ok = await verifyPassword(input.password, row?.password_hash ?? (await dummyHash()));
    if (!row || !ok) {
      await this.countFailure(email, meta.ip);
      throw AuthErrors.invalidCredentials();
    }
    // Only a caller who knows the password learns that the account is disabled or unverified.
    if (row.disabled_at) throw AuthErrors.accountDisabled();
    if (this.setting('email_verification_required') && !row.email_verified_at) throw AuthErrors.emailNotVerified();
    if (needsRehash(row.password_hash!)) await setPasswordHash(this.p.db, row.id, await hashPassword(input.password));
    return this.signedIn(row, ['pwd'], meta);
  }

  async refresh(refreshToken: string): Promise<{ user: PublicUser } & TokenPair> {
    const r = await this.sessions.rotate(refreshToken);
    if (!r.ok) throw this.refusedRefresh(r);
    const row = await userById(this.p.db, r.userId);
    return { user: publicUser(row!), ...(await this.pair(r.userId, r.sessionId, r.refreshToken, r.amr)) };
  }

  /** The error for a refused refresh token (refresh and logout answer alike). */
  private refusedRefresh(r: Failure): AppError {
    if (r.reason === 'reused') {
      this.p.log.warn('refresh token reused; session revoked', { session_id: r.sessionId });
      return AuthErrors.refreshTokenReused();
    }
    if (r.reason === 'revoked') return AuthErrors.sessionRevoked();
    if (r.reason === 'disabled') return AuthErrors.accountDisabled();
    return AuthErrors.invalidRefreshToken();
  }

  /**
   * Bearer access token → user: the authenticator of the user guard (src/http/user-guard.ts).
   * No token → 401 `unauthorized`; then checks the signature and expiry, then the session
   * (cached briefly, invalidated on revocation across instances).
   */
  async authenticate(accessToken: string | undefined): Promise<AuthenticatedUser> {
    if (!accessToken) throw AuthErrors.unauthorized();
    const v = this.tokens.verify(accessToken);
    if (!v.ok) throw v.reason === 'expired' ? AuthErrors.tokenExpired() : AuthErrors.invalidAccessToken();
    const state = this.sessions.cached(v.claims.sid) ?? (await this.sessions.load(v.claims.sid));
    if (!state || state.userId !== v.claims.sub || state.problem === 'revoked') throw AuthErrors.sessionRevoked();
    if (state.problem === 'disabled') throw AuthErrors.accountDisabled();
    const { amr, aal } = v.claims;
    return { userId: state.userId, sessionId: v.claims.sid, email: state.email, ...(amr ? { amr, aal } : {}) };
  }

  /**
   * End the session of an access token or of a refresh token; `all` ends every session
   * of the user. Only live credentials count: an access token of an ended session, or
   * a refresh token that is expired or spent, is refused (a spent one is reuse and
   * revokes its session, as on refresh) — so an old leaked token cannot log the user
   * out everywhere. A refused access token falls back to `refresh_token` when sent.
   */
  async logout(by: { accessToken?: string; refreshToken?: string }, all: boolean): Promise<void> {
    let who: { sessionId: string; userId: string } | undefined;
    if (by.accessToken) {
      try {
        who = await this.authenticate(by.accessToken);
      } catch (e) {
        if (!by.refreshToken) throw e;
      }
    }
    if (!who && by.refreshToken) {
      const r = await this.sessions.sessionOfRefresh(by.refreshToken);
      if (!r.ok) throw this.refusedRefresh(r);
      who = r;
    }
    if (!who)
      throw AuthErrors.unauthorized('Send the access token (Authorization: Bearer) or the refresh_token to log out.');
    if (all) await this.sessions.revokeUser(who.userId, 'logout_all');
    else await this.sessions.revoke(who.sessionId, 'logout');
  }

  /** The user of an authenticated request, from the session cache (kept fresh by `user:<id>` notifications). */
  async me(auth: AuthenticatedUser): Promise<PublicUser> {
    const state = this.sessions.cached(auth.sessionId) ?? (await this.sessions.load(auth.sessionId));
    if (!state || state.problem) throw AuthErrors.sessionRevoked();
    return state.user;
  }

  /** Always succeeds from the caller's view; a mail goes out only for a real account. */
  async forgotPassword(rawEmail: string, meta: ClientMeta): Promise<void> {
    await this.limit(`email_ip:${meta.ip}`, this.setting('rate_limit_email_per_ip'));
    const email = this.checkEmail(rawEmail);
    this.background(() => this.mailIfUser(email, 'password_reset', meta.origin));
  }

  async resendVerification(rawEmail: string, meta: ClientMeta): Promise<void> {
    if (!this.mail.isConfigured()) throw AuthErrors.mailNotConfigured();
    await this.limit(`email_ip:${meta.ip}`, this.setting('rate_limit_email_per_ip'));
    const email = this.checkEmail(rawEmail);
    this.background(() => this.mailIfUser(email, 'verify_email', meta.origin));
  }

  private async mailIfUser(email: string, purpose: Purpose, origin: string): Promise<void> {
    if (!this.mail.isConfigured()) return;
    const row = await userByEmail(this.p.db, email);
    if (!row || row.disabled_at || (purpose === 'verify_email' && row.email_verified_at)) return;
    if (!(await hit(this.p.db, `email_addr:${email}`, MAILS_PER_ADDRESS_PER_HOUR, 3600)).allowed) return;
    await sendActionMail(
      this.p,
      this.mail,
      purpose,
      email,
      () => issueActionToken(this.p.db, row.id, email, purpose),
      origin,
    );
  }

  /**
   * Set a new password with a mailed token; ends every session and clears the lock.
   * Order: IP limit, password policy (no work), token check, then the argon2id hash —
   * only a live token earns a hash, so garbage tokens cannot load the hashing queue
   * that logins share. The hash runs outside the transaction (on the embedded engine a
   * transaction holds the whole database); the spend re-checks the token under a row
   * lock, so of two resets racing with one token exactly one succeeds.
   */
  async resetPassword(token: string, password: string, meta: Pick<ClientMeta, 'ip'>): Promise<PublicUser> {
    await this.limitTokenTries(meta.ip);
    this.checkNewPassword('password', password);
    if (!(await liveActionTokenUser(this.p.db, token, 'password_reset')))
      throw AuthErrors.invalidToken('password reset');
    const hash = await hashPassword(password);
    const user = await this.p.db.transaction(async (tx) => {
      const t = await consumeActionToken(tx, token, 'password_reset');
      if (!t) throw AuthErrors.invalidToken('password reset');
      // The mailed token proves the mailbox: verified, and the first time the account is handed over.
      await mailboxProven(tx, this.sessions, t.userId);
      await setPasswordHash(tx, t.userId, hash);
      return (await userById(tx, t.userId))!;
    });
    await this.sessions.revokeUser(user.id, 'password_reset'); // also refreshes cached user records
    await this.unlock(user.email);
    return publicUser(user);
  }

  /** Change the password of the signed-in user; other sessions end, this one stays. */
  async changePassword(
    auth: AuthenticatedUser,
    current: string,
    next: string,
    meta: Pick<ClientMeta, 'ip'>,
  ): Promise<PublicUser> {
    await this.refuseLocked(auth.email, meta.ip);
    const row = await userById(this.p.db, auth.userId);
    if (!row) throw AuthErrors.sessionRevoked();
    if (!row.password_hash || !(await verifyPassword(current, row.password_hash))) {
      // A stolen access token must not become a way to guess the password.
      await this.countFailure(row.email, meta.ip);
      throw AuthErrors.invalidCurrentPassword();
    }
    this.checkNewPassword('new_password', next);
    await setPasswordHash(this.p.db, row.id, await hashPassword(next));
    await this.sessions.revokeUser(row.id, 'password_change', auth.sessionId);
    return publicUser(row);
  }

  /**
   * Confirm the address with the mailed link. The link proves the mailbox, not who holds
   * the account: unless the caller also shows it holds the account — an access token of
   * one of its sessions, or its password — the first proof hands the account over
   * (./ownership.ts: sessions end, the password set before is cleared). A wrong password
   * counts toward the lockout and leaves the token unspent.
   */
  async verifyEmail(
    token: string,
    meta: Pick<ClientMeta, 'ip'>,
    holder: { accessToken?: string; password?: string } = {},
  ): Promise<PublicUser> {
    await this.limitTokenTries(meta.ip);
    const userId = await liveActionTokenUser(this.p.db, token, 'verify_email');
    if (!userId) throw AuthErrors.invalidToken('verification');
    let holds = false;
    if (holder.accessToken) holds = (await this.authenticate(holder.accessToken)).userId === userId;
    if (!holds && holder.password !== undefined) {
      const row = await userById(this.p.db, userId);
      await this.refuseLocked(row!.email, meta.ip);
      if (!row?.password_hash || !(await verifyPassword(holder.password, row.password_hash))) {
        await this.countFailure(row!.email, meta.ip);
        throw AuthErrors.invalidCredentials();
      }
      holds = true;
    }
    const user = await this.p.db.transaction(async (tx) => {
      const t = await consumeActionToken(tx, token, 'verify_email');
      if (!t) throw AuthErrors.invalidToken('verification');
      if (!holds) return (await mailboxProven(tx, this.sessions, t.userId))!.user;
      await this.sessions.announce(`user:${t.userId}`, tx); // cached records of this user now say verified
      return (await markVerified(tx, t.userId))!;
    });
    return publicUser(user);
  }

  /**
   * Disable or re-enable a user (administration). Disabling ends every session on
   * every instance at once.
   */
  async setDisabled(userId: string, disabled: boolean, tx?: Queryable): Promise<void> {
    await (tx ?? this.p.db).query(
      'UPDATE basalt.users SET disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END, updated_at = now() WHERE id = $1',
      [userId, disabled],
    );
    if (disabled) await this.sessions.revokeUser(userId, 'disabled', undefined, tx);
    else await this.sessions.announce(`user:${userId}`, tx);
  }

  /** Delete a user (administration): sessions and tokens go with it; its access tokens stop at once everywhere. */
  /** Users whose e-mail contains `search`, newest first, with the total (the admin API's list). */
  searchUsers(f: { search?: string; limit?: number; offset?: number }) {
    return searchUsers(this.p.db, f);
  }

  /** One user as an administrator sees it, read in `tx` when given; undefined when none. */
  userDetail(id: string, tx?: Queryable): Promise<AdminUserView | undefined> {
    return userDetail(tx ?? this.p.db, id);
  }

  /** The sign-in lock of an address: the backstop and the client addresses failing or locked out (./lockout.ts). */
  async lockState(email: string): Promise<LockState> {
    return (await userLockout.states(this.p.db, [email], this.lockoutLimits().windowSeconds)).get(email)!;
  }

  /** The user's live sessions, newest first. */
  userSessions(id: string): Promise<UserSessionView[]> {
    return userSessions(this.p.db, id);
  }

  countUsers(): Promise<number> {
    return countUsers(this.p.db);
  }

  async deleteUser(userId: string, tx?: Queryable): Promise<boolean> {
    const { rowCount } = await (tx ?? this.p.db).query('DELETE FROM basalt.users WHERE id = $1', [userId]);
    if (rowCount) await this.sessions.announce(`user:${userId}`, tx);
    return rowCount > 0;
  }

  /**
   * Lift every lock of the address, from every source, and its per-account limits (login, code verify)
   * (a password reset or a new password set by an administrator; `users unlock`).
   * Returns the counters cleared.
   */
  async unlock(email: string, tx?: Queryable): Promise<number> {
    const cleared = await userLockout.unlock(tx ?? this.p.db, email);
    for (const kind of ACCOUNT_LIMITS) await resetBuckets(tx ?? this.p.db, accountBucketsPrefix(kind, email));
    return cleared;
  }

  async prune(): Promise<void> {
    await this.sessions.prune();
    await pruneActionTokens(this.p.db);
    await pruneCounters(this.p.db);
    await pruneEmailCodes(this.p.db);
    await this.oauth.prune();
  }
}

/**
 * Public Auth's housekeeping (a worker of src/workers.ts): every 15 minutes, expired
 * sessions, action tokens, rate-limit counters, e-mail codes and sign-in flows are deleted.
 */
export function startAuthHousekeeping(auth: AuthService, log: Logger): () => void {
  const timer = setInterval(
    () => auth.prune().catch((e) => log.warn('auth housekeeping failed', { cause: e })),
    PRUNE_EVERY_MS,
  );
  timer.unref();
  return () => clearInterval(timer);
}

/** The other services Public Auth uses: mail for its codes and links. */
export interface AuthDeps {
  mail: MailService;
}

/** Create the service: signing key, session notifications. Its housekeeping is a worker (src/workers.ts). */
export async function createAuthService(p: Platform, { mail }: AuthDeps): Promise<AuthService> {
  const configured = p.settings.get('auth.jwt_secret');
  // HS256 is only as strong as its key: a short operator-chosen secret could be brute-forced offline from one token.
  if (configured && configured.length < 32) {
    throw new ConfigError('auth.jwt_secret: must be at least 32 characters (or leave it empty to use a generated one)');
  }
  const secret = configured || (await getOrCreateSecret(p.db, 'jwt'));
  const sessions = new SessionStore(p.db, {
    reuseIntervalSeconds: () => p.settings.get('auth.refresh_reuse_interval_seconds'),
    refreshSeconds: () => p.settings.get('auth.refresh_token_seconds'),
  });
  await sessions.start();
  const service = new AuthService(p, accessTokens(secret), sessions, mail);
  service.methods = new SignInMethods(
    p,
    service,
    mail,
    await getOrCreateSecret(p.db, 'auth_email_codes'),
    await SecretBox.of(p.db, TOTP_BOX),
  );
  service.oauth = new OAuthFlows(p, service);
  void dummyHash(); // computed now, so the first unknown-address login is not faster than the rest
  p.onShutdown(async () => {
    await service.settled();
    await sessions.stop();
  });
  return service;
}
