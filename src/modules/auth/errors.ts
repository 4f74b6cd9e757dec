/**
 * Public Auth error codes, declared once with their status and safe message.
 * Rendered in format A by the foundation (`{success:false, error:{code, message, …}}`).
 */
import { AppError, Errors } from '../../http/errors';
import { UserErrors } from '../../http/user-guard';

export const AuthErrors = {
  /** Wrong password or unknown e-mail: one answer for both (no account enumeration). */
  invalidCredentials: () => new AppError(401, 'invalid_credentials', 'E-mail or password is wrong.'),
  emailTaken: () => new AppError(409, 'email_taken', 'An account with this e-mail already exists; log in or reset the password.'),
  registrationClosed: () => new AppError(403, 'registration_closed', 'Registration is closed on this site.'),
  accountDisabled: UserErrors.accountDisabled,
  emailNotVerified: () =>
    new AppError(403, 'email_not_verified', 'Confirm your e-mail address first; request a new link with POST /api/v1/auth/verify-email/resend.'),
  accountLocked: (retryAfter: number) =>
    new AppError(429, 'account_locked', `Too many failed logins; the account is locked. Try again in ${retryAfter} seconds or reset the password.`, {
      retryAfter,
      headers: { 'Retry-After': String(retryAfter) },
    }),
  rateLimited: (retryAfter: number) => Errors.rateLimited(retryAfter, `Too many attempts; try again in ${retryAfter} seconds.`),
  unauthorized: UserErrors.unauthorized,
  invalidAccessToken: UserErrors.invalidToken,
  tokenExpired: UserErrors.tokenExpired,
  sessionRevoked: UserErrors.sessionRevoked,
  invalidRefreshToken: () => new AppError(401, 'invalid_refresh_token', 'The refresh token is unknown or expired; log in again.'),
  /** A rotated refresh token came back: the session is revoked because the token may be stolen. */
  refreshTokenReused: () =>
    new AppError(401, 'refresh_token_reused', 'This refresh token was already used; the session has been revoked for safety. Log in again.'),
  invalidToken: (what: string) => new AppError(400, 'invalid_token', `The ${what} token is invalid, expired or already used; request a new one.`),
  invalidCurrentPassword: () => new AppError(400, 'invalid_current_password', 'The current password is wrong.'),
  mailNotConfigured: () => new AppError(503, 'mail_not_configured', 'E-mail is not configured on this site; the administrator must set mail.smtp_url.'),
  /** A format problem in one field (422 under /api/v1/auth). */
  field: (field: string, problem: string) => Errors.validation(`Invalid request: ${field}: ${problem}`, { [field]: problem }, 422),
};
