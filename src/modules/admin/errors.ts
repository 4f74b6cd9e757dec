/**
 * Admin API error codes (docs/admin-api.md §Errors), declared once with their status
 * and a message an operator can act on. Rendered in format A by the foundation.
 */
import { defineErrors, fieldProblem } from '../../http/errors';

export const AdminErrors = {
  ...defineErrors({
    unauthorized: {
      status: 401,
      code: 'unauthorized',
      message: 'Sign in to the administration first (no session, or it has ended).',
    },
    invalidCredentials: { status: 401, code: 'invalid_credentials', message: 'E-mail or password is wrong.' },
    csrfFailed: {
      status: 403,
      code: 'csrf_failed',
      message: (why: string) => `Refused as a possible cross-site request: ${why}.`,
    },
    notFound: { status: 404, code: 'not_found', message: (what: string) => `${what} does not exist.` },
    /** A CSV export nobody read for too long (docs/admin.md "Data browser"). */
    exportAbandoned: {
      status: 408,
      code: 'export_abandoned',
      message: 'The export was not read for too long and was stopped; start it again.',
    },
    settingPinned: {
      status: 409,
      code: 'setting_pinned',
      message: (key: string, pinnedBy: string) =>
        `${key} is set by ${pinnedBy}, which wins over stored values; change it there.`,
      extra: (_key: string, pinnedBy: string) => ({ details: { pinned_by: pinnedBy } }),
    },
    settingOperatorOnly: {
      status: 403,
      code: 'setting_operator_only',
      message: (key: string, why: string) =>
        `${key} can be changed only where the process is run (basalt settings set, the environment or the config file): ${why}.`,
    },
    lastAdmin: {
      status: 409,
      code: 'last_admin',
      message: 'The last administrator cannot be deleted; create another one first.',
    },
    conflict: { status: 409, code: 'conflict', message: (message: string) => message },
    invalidState: { status: 409, code: 'invalid_state', message: (message: string) => message },
    /** Backups on an external database (docs/backup.md): the provider's snapshots or pg_dump instead. */
    notSupported: { status: 409, code: 'not_supported', message: (message: string) => message },
    setupLinkInvalid: {
      status: 410,
      code: 'setup_link_invalid',
      message:
        "This setup link is unknown, used or expired; restart 'basalt serve' for a new one, or run 'basalt admin create'.",
    },
    accountLocked: {
      status: 429,
      code: 'account_locked',
      message: (retryAfter: number) =>
        `Too many failed sign-ins; this account is locked. Try again in ${retryAfter} seconds.`,
      extra: (retryAfter: number) => ({ retryAfter }),
    },
    rateLimited: {
      status: 429,
      code: 'rate_limited',
      message: (retryAfter: number) => `Too many sign-in attempts; try again in ${retryAfter} seconds.`,
      extra: (retryAfter: number) => ({ retryAfter }),
    },
  }),
  /** A field problem: 400 `validation_error` with `details.fields[field]`. */
  field: (field: string, problem: string) => fieldProblem(field, problem),
};
