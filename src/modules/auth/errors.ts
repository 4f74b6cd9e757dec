/**
 * Public Auth error codes, declared once with their status and safe message.
 * Rendered in format A by the foundation (`{success:false, error:{code, message, …}}`);
 * the access-token ones also in any area that asks for a signed-in user (the user
 * guard, docs/auth.md), in that area's envelope.
 */
import { defineErrors, fieldProblem } from '../../http/errors';

/** The challenge every refused access token carries. */
const challenge = { headers: { 'WWW-Authenticate': 'Bearer error="invalid_token"' } };

export const AuthErrors = {
  ...defineErrors({
    /** Wrong password or unknown e-mail: one answer for both (no account enumeration). */
    invalidCredentials: { status: 401, code: 'invalid_credentials', message: 'E-mail or password is wrong.' },
    emailTaken: {
      status: 409,
      code: 'email_taken',
      message: 'An account with this e-mail already exists; log in or reset the password.',
    },
    registrationClosed: { status: 403, code: 'registration_closed', message: 'Registration is closed on this site.' },
    accountDisabled: {
      status: 403,
      code: 'account_disabled',
      message: 'This account is disabled; contact the site administrator.',
    },
    emailNotVerified: {
      status: 403,
      code: 'email_not_verified',
      message: 'Confirm your e-mail address first; request a new link with POST /api/v1/auth/verify-email/resend.',
    },
    accountLocked: {
      status: 429,
      code: 'account_locked',
      message: (retryAfter: number) =>
        `Too many failed logins; the account is locked. Try again in ${retryAfter} seconds or reset the password.`,
      extra: (retryAfter: number) => ({ retryAfter }),
    },
    rateLimited: {
      status: 429,
      code: 'rate_limited',
      message: (retryAfter: number) => `Too many attempts; try again in ${retryAfter} seconds.`,
      extra: (retryAfter: number) => ({ retryAfter }),
    },
    /** No access token (or no usable credential at all). */
    unauthorized: {
      status: 401,
      code: 'unauthorized',
      message: 'Send a valid access token: Authorization: Bearer <access_token>.',
      extra: { headers: { 'WWW-Authenticate': 'Bearer' } },
    },
    invalidAccessToken: {
      status: 401,
      code: 'unauthorized',
      message: 'The access token is invalid; log in again.',
      extra: challenge,
    },
    tokenExpired: {
      status: 401,
      code: 'token_expired',
      message: 'The access token has expired; get a new one with POST /api/v1/auth/refresh.',
      extra: challenge,
    },
    /** Logout, password change or reuse of a refresh token ended the session. */
    sessionRevoked: {
      status: 401,
      code: 'session_revoked',
      message: 'This session has ended (logout, password change or reuse of a refresh token); log in again.',
      extra: challenge,
    },
    invalidRefreshToken: {
      status: 401,
      code: 'invalid_refresh_token',
      message: 'The refresh token is unknown or expired; log in again.',
    },
    /** A rotated refresh token came back: the session is revoked because the token may be stolen. */
    refreshTokenReused: {
      status: 401,
      code: 'refresh_token_reused',
      message: 'This refresh token was already used; the session has been revoked for safety. Log in again.',
    },
    invalidToken: {
      status: 400,
      code: 'invalid_token',
      message: (what: string) => `The ${what} token is invalid, expired or already used; request a new one.`,
    },
    /** A new account's address whose local part or a domain label mixes scripts (users.ts `mixedScriptAddress`). */
    emailMixedScripts: {
      status: 400,
      code: 'email_mixed_scripts',
      message:
        'The e-mail address mixes letters of different scripts (for example Latin and Cyrillic) before @ or within one part of its domain, which can imitate another address; new accounts need one script in each.',
    },
    invalidCurrentPassword: {
      status: 400,
      code: 'invalid_current_password',
      message: 'The current password is wrong.',
    },
    mailNotConfigured: {
      status: 503,
      code: 'mail_not_configured',
      message: 'E-mail is not configured on this site; the administrator must set mail.smtp_url.',
    },
  }),
  /** A format problem in one field (422 under /api/v1/auth). */
  field: (field: string, problem: string) => fieldProblem(field, problem, 422),
};
