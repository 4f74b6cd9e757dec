/**
 * API key error codes (docs/api-keys.md), declared once with their status and message;
 * the CLI prints the message, the admin API renders them in format A.
 */
import { defineErrors, validationError } from '../../http/errors';

export const KeyErrors = {
  ...defineErrors({
    notFound: {
      status: 404,
      code: 'key_not_found',
      message: (id: string) => `No API key with id '${id.slice(0, 64)}'. List keys with 'basalt keys list'.`,
    },
  }),
  /** A creation request that breaks a rule: 400 `validation_error` naming the field; the message says what to fix. */
  invalid: (field: string, message: string) => validationError(message, { [field]: message }),
  /** Several fields at once: the message joins theirs, `details.fields` names each. */
  invalidFields: (fields: Record<string, string>) => validationError(Object.values(fields).join(' '), fields),
};
