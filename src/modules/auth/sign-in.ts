/**
 * E-mail codes, the TOTP second factor and the user's own identities (docs/auth.md).
 * Provider sign-in is oauth-flow.ts. No HTTP here; every sign-in ends in
 * `AuthService.signedIn`, which asks for the second factor when the user has one.
 */
import type { SettingSuffix, SettingValue } from '../../config/schema';
import type { Platform } from '../../platform';
import type { Db } from '../../db/engine';
import { AuthErrors } from './errors';
import { SignInErrors } from './sign-in-errors';
import type { SecretBox } from '../../db/secrets';
import type { AuthenticatedUser, ClientMeta, SignInCore, SignInResult, TokenPair } from './sign-in-core';
import {
  checkEmail,
  mixedScriptAddress,
  publicUser,
  userByEmail,
  userById,
  type PublicUser,
  type UserRow,
} from './users';
import { accountFromBucket, hit, limitPerMinute } from './rate-limit';
import { userLockout } from './lockout';
import { EMAIL_CODE_SECONDS, issueEmailCode, useEmailCode } from './email-codes';
import {
  confirmTotp,
  enrollTotp,
  mfaChallenge,
  recoveryCodesLeft,
  removeTotp,
  spendMfaChallenge,
  totpState,
  useRecoveryCode,
  useTotpCode,
} from './totp';
import { identitiesOf, unlinkIdentity, type Identity } from './identities';
import { mailboxProven } from './ownership';
import type { MailService } from '../mail/service';
import { isUuid } from '../../util/uuid';

/** Mails to one address per hour, whoever asks (shared with reset and verification mails). */
const MAILS_PER_ADDRESS_PER_HOUR = 5;

export interface SignInMethodsView {
  identities: Identity[];
  has_password: boolean;
  totp_enabled: boolean;
  recovery_codes_left: number;
}

/** Insert a user without a password (a provider or an e-mail code made it), verified when `verified`. */
export async function insertPasswordlessUser(db: Db, email: string, verified: boolean): Promise<UserRow> {
  const { rows } = await db.query<UserRow>(
    `INSERT INTO basalt.users (email, password_hash, email_verified_at) VALUES ($1, NULL, CASE WHEN $2 THEN now() END)
     RETURNING id, email, password_hash, email_verified_at, disabled_at, created_at`,
    [email, verified],
  );
  return rows[0]!;
}

export class SignInMethods {
  constructor(
    private p: Platform,
    private auth: SignInCore,
    private mail: MailService,
    /** Key of the e-mail codes' HMAC (basalt.secrets). */
    private codeKey: string,
    /** Seals the TOTP secrets (basalt.secrets `box:auth_totp`). */
    private totpBox: SecretBox,
  ) {}

  private setting<K extends SettingSuffix<'auth'>>(key: K): SettingValue<`auth.${K}`> {
    return this.p.settings.get(`auth.${key}`);
  }

  private limit(bucket: string, perMinute: number): Promise<void> {
    return limitPerMinute(this.p.db, bucket, perMinute, AuthErrors.rateLimited);
  }

  private email(raw: string): string {
    const r = checkEmail(raw);
    if (!r.ok) throw AuthErrors.field('email', r.problem);
    return r.email;
  }

  /**
   * Mail a sign-in code. The caller always hears 202 (no enumeration): whether a mail goes
   * out is decided after the answer, like the reset mail. A code goes to an existing,
   * enabled account, or to any address while registration is open (the code then signs up).
   */
  async requestEmailCode(raw: string, meta: ClientMeta): Promise<void> {
    if (!this.mail.isConfigured()) throw AuthErrors.mailNotConfigured();
    await this.limit(`email_ip:${meta.ip}`, this.setting('rate_limit_email_per_ip'));
    const email = this.email(raw);
    await this.limit(`otp_request:${email}`, this.setting('rate_limit_login_per_account'));
    this.auth.background(async () => {
      const row = await userByEmail(this.p.db, email);
      if (row ? row.disabled_at : !this.setting('registration_open')) return;
      if (!(await hit(this.p.db, `email_addr:${email}`, MAILS_PER_ADDRESS_PER_HOUR, 3600)).allowed) return;
      const code = await issueEmailCode(this.p.db, this.codeKey, email);
      await this.mail.enqueue({
        to: [email],
        template: 'auth.otp',
        variables: {
          app_name: this.p.settings.get('app.name'),
          email,
          code,
          expires_in_minutes: EMAIL_CODE_SECONDS / 60,
        },
      });
    });
  }

  /**
   * Sign in with a mailed code; it proves the mailbox, so the address becomes verified —
   * the first time, with the account handed over to this caller (./ownership.ts).
   * Limited per IP and per account from one client address, as login is (guessing from
   * many addresses ends at the fifth wrong code, which burns it, and at the backstop).
   * Wrong codes count toward the lockout like wrong passwords (per account and client
   * address, with the backstop), and a locked-out address is refused before the code is
   * looked at, so its tries neither spend nor burn the owner's code.
   */
  async verifyEmailCode(raw: string, code: string, meta: ClientMeta): Promise<SignInResult> {
    await this.limit(`otp_ip:${meta.ip}`, this.setting('rate_limit_login_per_ip'));
    const email = this.email(raw);
    await this.auth.refuseLocked(email, meta.ip);
    await this.limit(accountFromBucket('otp_account', email, meta.ip), this.setting('rate_limit_login_per_account'));
    if (!(await useEmailCode(this.p.db, this.codeKey, email, code))) {
      await this.auth.countFailure(email, meta.ip);
      throw SignInErrors.invalidCode();
    }
    let row = await userByEmail(this.p.db, email);
    if (!row) {
      if (!this.setting('registration_open')) throw AuthErrors.registrationClosed();
      if (mixedScriptAddress(email)) throw AuthErrors.emailMixedScripts();
      try {
        row = await insertPasswordlessUser(this.p.db, email, true);
      } catch {
        row = await userByEmail(this.p.db, email); // registered meanwhile by a concurrent request
        if (!row) throw SignInErrors.invalidCode();
      }
    }
    if (row.disabled_at) throw AuthErrors.accountDisabled();
    if (!row.email_verified_at) {
      // The first proof of the mailbox: the account is this caller's now; the session made next survives.
      const id = row.id;
      const proven = await this.p.db.transaction((tx) => mailboxProven(tx, this.auth.sessions, id));
      if (!proven) throw SignInErrors.invalidCode(); // deleted meanwhile
      row = proven.user;
    }
    return this.auth.signedIn(row, ['otp'], meta);
  }

  async enrollTotp(user: AuthenticatedUser): Promise<{ secret: string; otpauth_url: string }> {
    const r = await enrollTotp(this.p.db, this.totpBox, user.userId, user.email, this.p.settings.get('app.name'));
    if (!r) throw SignInErrors.mfaAlreadyEnabled();
    return r;
  }

  /**
   * Turn the enrolled TOTP on with a current code. Every other session of the user ends
   * (the one confirming stays): a session signed in before the second factor existed,
   * perhaps by whoever knew only the password, must sign in again and pass it.
   */
  async confirmTotp(user: AuthenticatedUser, code: string): Promise<{ recovery_codes: string[] }> {
    const state = await totpState(this.p.db, user.userId);
    if (state === 'enabled') throw SignInErrors.mfaAlreadyEnabled();
    if (state === 'none') throw SignInErrors.mfaNotEnrolled();
    const codes = await this.p.db.transaction(async (tx) => {
      const codes = await confirmTotp(tx, this.totpBox, user.userId, code);
      if (codes) await this.auth.sessions.revokeUser(user.userId, 'mfa_enabled', user.sessionId, tx);
      return codes;
    });
    if (!codes) throw SignInErrors.invalidCode();
    return { recovery_codes: codes };
  }

  /** Turn TOTP off with a current code; wrong codes count toward the lockout like a wrong password. */
  async disableTotp(user: AuthenticatedUser, code: string, meta: Pick<ClientMeta, 'ip'>): Promise<void> {
    await this.auth.refuseLocked(user.email, meta.ip);
    if ((await totpState(this.p.db, user.userId)) !== 'enabled') throw SignInErrors.mfaNotEnabled();
    if (!(await useTotpCode(this.p.db, this.totpBox, user.userId, code))) {
      await this.auth.countFailure(user.email, meta.ip);
      throw SignInErrors.invalidCode();
    }
    await this.p.db.transaction((tx) => removeTotp(tx, user.userId));
  }

  /**
   * The second step of a sign-in: a TOTP code or a recovery code with the mfa_token. A
   * locked address is refused before any code is looked at; wrong codes count toward
   * the lockout; the token stays usable until it expires or a right code spends it.
   */
  async verifyMfa(
    input: { mfa_token: string; code?: string; recovery_code?: string },
    meta: ClientMeta,
  ): Promise<{ user: PublicUser } & TokenPair> {
    await this.limit(`mfa_ip:${meta.ip}`, this.setting('rate_limit_login_per_ip'));
    if (input.code === undefined && input.recovery_code === undefined)
      throw AuthErrors.field('code', 'send code (from the authenticator app) or recovery_code');
    const challenge = await mfaChallenge(this.p.db, input.mfa_token);
    if (!challenge) throw SignInErrors.invalidMfaToken();
    const row = await userById(this.p.db, challenge.userId);
    if (!row) throw SignInErrors.invalidMfaToken();
    await this.auth.refuseLocked(row.email, meta.ip);
    const factor = input.code !== undefined ? 'totp' : 'recovery';
    const ok =
      factor === 'totp'
        ? await useTotpCode(this.p.db, this.totpBox, row.id, input.code!)
        : await useRecoveryCode(this.p.db, row.id, input.recovery_code!);
    if (!ok) {
      await this.auth.countFailure(row.email, meta.ip);
      throw SignInErrors.invalidCode();
    }
    if (!(await spendMfaChallenge(this.p.db, challenge.id))) throw SignInErrors.invalidMfaToken();
    if (row.disabled_at) throw AuthErrors.accountDisabled();
    await userLockout.clearSource(this.p.db, row.email, meta.ip);
    return { user: publicUser(row), ...(await this.auth.issue(row.id, meta, [...challenge.amr, factor])) };
  }

  /** The user's ways to sign in: linked providers, whether a password is set, the second factor. */
  async methods(userId: string): Promise<SignInMethodsView> {
    const row = await userById(this.p.db, userId);
    if (!row) throw AuthErrors.sessionRevoked();
    return {
      identities: await identitiesOf(this.p.db, userId),
      has_password: row.password_hash !== null,
      totp_enabled: (await totpState(this.p.db, userId)) === 'enabled',
      recovery_codes_left: await recoveryCodesLeft(this.p.db, userId),
    };
  }

  /** Unlink a provider, never the last way to sign in (409 `last_sign_in_method`). */
  async unlink(userId: string, identityId: string): Promise<void> {
    const r = isUuid(identityId)
      ? await this.p.db.transaction((tx) => unlinkIdentity(tx, userId, identityId))
      : 'not_found';
    if (r === 'not_found') throw SignInErrors.identityNotFound();
    if (r === 'last') throw SignInErrors.lastSignInMethod();
  }
}
