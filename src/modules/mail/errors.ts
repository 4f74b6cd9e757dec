/**
 * The Mail API's error codes, declared once with their status and a message that
 * says what to do. Rendered in format B by the HTTP foundation.
 */
import { AppError } from '../../http/errors';

export const MailErrors = {
  /** 503: no SMTP server or no sender address configured. */
  notConfigured: (why = 'mail.smtp_url or mail.from is empty') =>
    new AppError(503, 'mail_not_configured', `Mail is not configured on this server (${why}): set mail.smtp_url and mail.from (admin panel /_/ → Settings, 'basalt settings set', basalt.toml or BASALT_MAIL_*).`),
  /** 502: the SMTP server refused the message or could not be reached. */
  provider: (reason: string, cause?: unknown) =>
    new AppError(502, 'mail_provider_error', `The mail server did not accept the message: ${reason}`, { details: { reason }, cause }),
  templateNotFound: (name: string) =>
    new AppError(404, 'template_not_found', `No mail template named '${name}'.`, { details: { template: name } }),
  jobNotFound: () => new AppError(404, 'job_not_found', 'No mail job with this id for this API key.'),
  /** 400 validation_error naming the offending field(s). */
  invalid: (message: string, fields: Record<string, string>) =>
    new AppError(400, 'validation_error', message, { details: { fields } }),
  missingVariables: (names: string[]) =>
    new AppError(400, 'validation_error', `The template uses variables the request does not give: ${names.join(', ')}.`, {
      details: { fields: Object.fromEntries(names.map((n) => [`variables.${n}`, 'required by the template'])), missing_variables: names },
    }),
  /** Two sources of the key (Idempotency-Key, X-Idempotency-Key, body idempotency_key) disagree. */
  idempotencyConflictingKeys: (field: string, other: string) =>
    new AppError(400, 'validation_error', `The idempotency key is given twice with different values (${other} and ${field}); send one, or the same value in both.`, {
      details: { fields: { [field]: `differs from ${other}` } },
    }),
  idempotencyReused: () =>
    new AppError(422, 'idempotency_key_reused', 'This idempotency key was already used with a different request; use a new key for a new message.'),
  idempotencyInProgress: () =>
    new AppError(409, 'idempotency_key_in_progress', 'A request with this idempotency key is still being processed; retry in a moment to get its result.', {
      retryAfter: 1,
      headers: { 'Retry-After': '1' },
    }),
};
