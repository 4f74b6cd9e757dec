/**
 * Error codes of the sign-in methods beyond passwords (docs/auth.md): providers,
 * e-mail codes, the second factor, identities. Format A like the rest of Public Auth.
 * Failures of a provider callback are not these: they travel to the front-end as
 * `#error=<code>` (CALLBACK_ERRORS in oauth-flow.ts).
 */
import { defineErrors } from '../../http/errors';

export const SignInErrors = defineErrors({
  providerNotFound: {
    status: 404,
    code: 'provider_not_found',
    message: 'No sign-in provider of this name is configured (auth.oauth_providers).',
  },
  providerUnavailable: {
    status: 502,
    code: 'provider_unavailable',
    message: 'The sign-in provider could not be reached or answered wrongly; try again later.',
  },
  /** `problem`: what is wrong with redirect_to (./redirects.ts), also in details.fields.redirect_to. */
  invalidRedirect: {
    status: 400,
    code: 'invalid_redirect',
    message: (problem: string) => `redirect_to ${problem}.`,
    extra: (problem: string) => ({ details: { fields: { redirect_to: problem } } }),
  },
  /** A callback whose state is unknown, expired or spent: there is no trusted place to send the browser. */
  invalidState: {
    status: 400,
    code: 'invalid_state',
    message: 'This sign-in link is unknown, expired or already used; start the sign-in again.',
  },
  invalidExchangeCode: {
    status: 400,
    code: 'invalid_exchange_code',
    message: 'The exchange code is unknown, expired or already used; sign in again.',
  },
  invalidLinkTicket: {
    status: 400,
    code: 'invalid_link_ticket',
    message: 'The link ticket is unknown, expired or already used; ask for a new one.',
  },
  /** A link confirmation posted without its page's token or from another browser (the link cookie): no trusted place to go. */
  invalidLinkConfirmation: {
    status: 400,
    code: 'invalid_link_confirmation',
    message:
      'This link confirmation is unknown, expired, already used or from another browser; link the provider again from your account.',
  },
  /** A wrong e-mail code, TOTP code or recovery code. */
  invalidCode: { status: 401, code: 'invalid_code', message: 'The code is wrong, expired or already used.' },
  invalidMfaToken: {
    status: 401,
    code: 'invalid_mfa_token',
    message: 'The mfa_token is unknown or expired; sign in again.',
  },
  mfaAlreadyEnabled: {
    status: 409,
    code: 'mfa_already_enabled',
    message: 'A second factor is already on; turn it off first to enroll again.',
  },
  mfaNotEnrolled: {
    status: 400,
    code: 'mfa_not_enrolled',
    message: 'Start with POST /api/v1/auth/mfa/totp/enroll.',
  },
  mfaNotEnabled: { status: 400, code: 'mfa_not_enabled', message: 'No second factor is on for this account.' },
  identityNotFound: { status: 404, code: 'identity_not_found', message: 'No such linked identity on this account.' },
  lastSignInMethod: {
    status: 409,
    code: 'last_sign_in_method',
    message: 'This is the last way to sign in to the account; set a password or link another provider first.',
  },
});
