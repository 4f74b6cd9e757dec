/**
 * The Mail API's error codes, declared once with their status and a message that
 * says what to do. Rendered in format B by the HTTP foundation.
 */
import { defineErrors, validationError } from '../../http/errors';

export const MailErrors = {
  ...defineErrors({
    /** 503: no SMTP server or no sender address configured. */
    notConfigured: {
      status: 503,
      code: 'mail_not_configured',
      message: (why: string = 'mail.smtp_url or mail.from is empty') =>
        `Mail is not configured on this server (${why}): set mail.smtp_url and mail.from (admin panel /_/ → Settings, 'basalt settings set', basalt.toml or BASALT_MAIL_*).`,
    },
    /** 502: the SMTP server refused the message or could not be reached. */
    provider: {
      status: 502,
      code: 'mail_provider_error',
      message: (reason: string) => `The mail server did not accept the message: ${reason}`,
      extra: (reason: string, cause?: unknown) => ({ details: { reason }, cause }),
    },
    templateNotFound: {
      status: 404,
      code: 'template_not_found',
      message: (name: string) => `No mail template named '${name}'.`,
      extra: (name: string) => ({ details: { template: name } }),
    },
    jobNotFound: { status: 404, code: 'job_not_found', message: 'No mail job with this id for this API key.' },
    idempotencyReused: {
      status: 422,
      code: 'idempotency_key_reused',
      message: 'This idempotency key was already used with a different request; use a new key for a new message.',
    },
    idempotencyInProgress: {
      status: 409,
      code: 'idempotency_key_in_progress',
      message: 'A request with this idempotency key is still being processed; retry in a moment to get its result.',
      extra: { retryAfter: 1 },
    },
  }),
  /** 400 validation_error naming the offending field(s). */
  invalid: (message: string, fields: Record<string, string>) => validationError(message, fields),
  /** 400 validation_error: `details.missing_variables` beside a field per variable. */
  missingVariables: (names: string[]) =>
    validationError(
      `The template uses variables the request does not give: ${names.join(', ')}.`,
      Object.fromEntries(names.map((n) => [`variables.${n}`, 'required by the template'])),
      { details: { missing_variables: names } },
    ),
  /** Two sources of the key (Idempotency-Key, X-Idempotency-Key, body idempotency_key) disagree. */
  idempotencyConflictingKeys: (field: string, other: string) =>
    validationError(
      `The idempotency key is given twice with different values (${other} and ${field}); send one, or the same value in both.`,
      {
        [field]: `differs from ${other}`,
      },
    ),
};
