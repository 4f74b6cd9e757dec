/**
 * Admin API error codes (docs/admin-api.md §Errors), declared once with their status
 * and a message an operator can act on. Rendered in format A by the foundation.
 */
import { AppError, Errors } from '../../http/errors';

export const AdminErrors = {
  unauthorized: () => new AppError(401, 'unauthorized', 'Sign in to the administration first (no session, or it has ended).'),
  invalidCredentials: () => new AppError(401, 'invalid_credentials', 'E-mail or password is wrong.'),
  csrfFailed: (why: string) => new AppError(403, 'csrf_failed', `Refused as a possible cross-site request: ${why}.`),
  notFound: (what: string) => new AppError(404, 'not_found', `${what} does not exist.`),
  settingPinned: (key: string, pinnedBy: string) =>
    new AppError(409, 'setting_pinned', `${key} is set by ${pinnedBy}, which wins over stored values; change it there.`, { details: { pinned_by: pinnedBy } }),
  lastAdmin: () => new AppError(409, 'last_admin', 'The last administrator cannot be deleted; create another one first.'),
  conflict: (message: string) => new AppError(409, 'conflict', message),
  invalidState: (message: string) => new AppError(409, 'invalid_state', message),
  setupLinkInvalid: () =>
    new AppError(410, 'setup_link_invalid', "This setup link is unknown, used or expired; restart 'basalt serve' for a new one, or run 'basalt admin create'."),
  accountLocked: (retryAfter: number) =>
    new AppError(429, 'account_locked', `Too many failed sign-ins; this account is locked. Try again in ${retryAfter} seconds.`, {
      retryAfter,
      headers: { 'Retry-After': String(retryAfter) },
    }),
  rateLimited: (retryAfter: number) => Errors.rateLimited(retryAfter, `Too many sign-in attempts; try again in ${retryAfter} seconds.`),
  /** A field problem: 400 `validation_error` with `details.fields[field]`. */
  field: (field: string, problem: string) => Errors.validation(`Invalid request: ${field}: ${problem}`, { [field]: problem }),
};
