/**
 * Public Auth routes under /api/v1/auth (docs/auth.md). HTTP only: the access-mode
 * gate, reading the request, calling the service, answering format A.
 */
import { rootOf, type AreaFacts } from '../../http/areas';
import { Elysia } from 'elysia';
import type { Basalt } from '../../services';
import { platformGuards } from '../../guards';
import { bearerToken } from '../../http/user-guard';
import { optionalJson } from '../../http/optional-json';
import { successResponse } from '../../http/envelope';
import { Bodies, Responses } from './model';
import { errorsOf } from '../../http/envelope-schemas';
import { SignInResponses } from './sign-in-model';
import { meta, oauthBrowserRoutes, signInRoutes } from './sign-in-routes';

const bearer = [{ Bearer: [] }];

export function authRoutes(p: Basalt, area: AreaFacts) {
  const errors = errorsOf(area);
  const auth = () => p.services.auth;
  /** The success answer, serialized (src/http/envelope.ts `successResponse`). */
  const ok = (request: Request, data: unknown, status = 200) => successResponse(request, data, { status });

  return (
    new Elysia({ name: 'basalt.auth', prefix: rootOf(area) })
      // web.public_api_access_mode: in api_key_required mode every auth route needs X-API-Key.
      // Guards check before body validation (docs/api-keys.md: no key → 401 api_key_required,
      // whatever the body); so do the Bearer routes' `user: true`: 401, never a 422 about a body
      // the caller may not send. Only malformed JSON is answered earlier, by the parser (400).
      .use(platformGuards(p, p.services))
      // Browser navigations to and from a provider cannot carry X-API-Key: mounted before the gate.
      .use(oauthBrowserRoutes(p, area))
      .guard({ publicAccess: true })
      .post('/register', async ({ body, request }) => ok(request, await auth().register(body, meta(request)), 201), {
        body: Bodies.register,
        response: { 201: Responses.register, ...errors(400, 401, 403, 409, 422, 429) },
        detail: {
          summary: 'Register a user',
          'x-codes': {
            400: ['email_mixed_scripts'],
            403: ['registration_closed'],
            409: ['email_taken'],
            429: ['rate_limited'],
          },
          description:
            'Creates an account (201). The e-mail is trimmed, NFKC-normalized and lower-cased, its domain converted to the ASCII (xn--) form (control and invisible characters → 422); an address already registered in any spelling → 409 `email_taken`; ' +
            'a part before @, or a domain label, that mixes scripts (Latin with Cyrillic, …) → 400 `email_mixed_scripts`. ' +
            'Returns tokens unless auth.email_verification_required is on. A verify_email mail is sent when mail is configured. ' +
            '403 `registration_closed` when auth.registration_open is off; 429 `rate_limited` past auth.rate_limit_register_per_ip (default 5/min).',
        },
      })
      .post('/login', async ({ body, request }) => ok(request, await auth().login(body, meta(request))), {
        body: Bodies.login,
        response: { 200: SignInResponses.signIn, ...errors(401, 403, 422, 429) },
        detail: {
          summary: 'Log in with e-mail and password',
          'x-codes': {
            401: ['invalid_credentials'],
            403: ['account_disabled', 'email_not_verified'],
            429: ['rate_limited', 'account_locked'],
          },
          description:
            'Returns an access token (15 min) and a refresh token (30 days). Wrong password or unknown e-mail → 401 `invalid_credentials`. ' +
            '429 `rate_limited` past 10/min per IP or 5/min per account; 5 failures in 15 min → 429 `account_locked` for 15 min (both with Retry-After). ' +
            '403 `account_disabled` or `email_not_verified` once the password is right. ' +
            'With TOTP on: `{mfa_required: true, mfa_token}` and no tokens; finish with POST /api/v1/auth/mfa/verify.',
        },
      })
      .post('/refresh', async ({ body, request }) => ok(request, await auth().refresh(body.refresh_token)), {
        body: Bodies.refresh,
        response: { 200: Responses.session, ...errors(401, 403, 422) },
        detail: {
          summary: 'Rotate the refresh token',
          'x-codes': { 401: ['invalid_refresh_token', 'refresh_token_reused'], 403: ['account_disabled'] },
          description:
            'Exchanges a refresh token for a new access token and a new refresh token; the old one is spent. Presented again within ' +
            'auth.refresh_reuse_interval_seconds (10) while that new token is unused (concurrent refreshes, a retry) → 200 with the same new ' +
            'refresh token. Otherwise a spent token → 401 `refresh_token_reused` and the whole session is revoked (its access tokens stop at once).',
        },
      })
      .post(
        '/logout',
        async ({ body, request }) => {
          await auth().logout(
            { accessToken: bearerToken(request), refreshToken: body?.refresh_token },
            body?.all ?? false,
          );
          return ok(request, { message: 'Logged out.' });
        },
        {
          parse: optionalJson,
          body: Bodies.logout,
          response: { 200: Responses.done, ...errors(401, 422) },
          detail: {
            summary: 'Log out',
            'x-codes': {
              401: [
                'unauthorized',
                'token_expired',
                'session_revoked',
                'invalid_refresh_token',
                'refresh_token_reused',
              ],
            },
            description:
              'Revokes the session of the Bearer access token (or of `refresh_token`); `all: true` revokes every session of the user. Its access tokens stop working at once. ' +
              'Only live credentials log out: an access token of an ended session → 401 `session_revoked`; an expired refresh token → 401 `invalid_refresh_token`; ' +
              'a spent one → 401 `refresh_token_reused` and its session is revoked, as on refresh. ' +
              'With neither an access token nor a refresh token → 401 `unauthorized`. The body is optional.',
            // The Bearer access token, or no scheme at all when the body carries refresh_token.
            security: [...bearer, {}],
          },
        },
      )
      .get(
        '/me',
        async ({ user, request }) => ok(request, { user: await auth().me(user), session_id: user.sessionId }),
        {
          user: true,
          response: { 200: Responses.me, ...errors(401, 403) },
          detail: {
            summary: 'The signed-in user',
            'x-codes': { 401: ['unauthorized', 'token_expired', 'session_revoked'], 403: ['account_disabled'] },
            description:
              '401 `unauthorized` (no or invalid token), `token_expired`, or `session_revoked`; 403 `account_disabled`.',
            security: bearer,
          },
        },
      )
      .post(
        '/password/forgot',
        async ({ body, request }) => {
          await auth().forgotPassword(body.email, meta(request));
          return ok(request, {
            message: 'If an account exists for this address, a password reset link is on its way.',
          });
        },
        {
          body: Bodies.forgot,
          response: { 200: Responses.done, ...errors(422, 429) },
          detail: {
            summary: 'Ask for a password reset mail',
            'x-codes': { 429: ['rate_limited'] },
            description:
              'Always 200, whether or not the address has an account. When it has one and mail is configured, a password_reset mail carries a link ' +
              'with a single-use token valid 1 hour. 429 past auth.rate_limit_email_per_ip.',
          },
        },
      )
      .post(
        '/password/reset',
        async ({ body, request }) =>
          ok(request, { user: await auth().resetPassword(body.token, body.password, meta(request)) }),
        {
          body: Bodies.reset,
          response: { 200: Responses.user, ...errors(400, 422, 429) },
          detail: {
            summary: 'Set a new password with a mailed token',
            'x-codes': { 400: ['invalid_token'], 429: ['rate_limited'] },
            description:
              'Spends the token, sets the password, marks the address verified and revokes every session of the user. 400 `invalid_token` when unknown, expired or used. ' +
              '429 `rate_limited` past auth.rate_limit_token_per_ip (default 10/min, shared with verify-email).',
          },
        },
      )
      .post(
        '/password/change',
        async ({ body, user, request }) =>
          ok(request, {
            user: await auth().changePassword(user, body.current_password, body.new_password, meta(request)),
          }),
        {
          user: true,
          body: Bodies.change,
          response: { 200: Responses.user, ...errors(400, 401, 403, 422, 429) },
          detail: {
            summary: 'Change the password',
            'x-codes': {
              400: ['invalid_current_password'],
              401: ['unauthorized', 'token_expired', 'session_revoked'],
              403: ['account_disabled'],
              429: ['account_locked'],
            },
            description:
              'Needs the current password (400 `invalid_current_password`, counted toward lockout). Every other session of the user is revoked; this one stays.',
            security: bearer,
          },
        },
      )
      .post(
        '/verify-email',
        async ({ body, request }) =>
          ok(request, {
            user: await auth().verifyEmail(body.token, meta(request), {
              accessToken: bearerToken(request),
              password: body.password,
            }),
          }),
        {
          body: Bodies.verify,
          response: { 200: Responses.user, ...errors(400, 401, 403, 422, 429) },
          detail: {
            summary: 'Confirm an e-mail address',
            'x-codes': {
              400: ['invalid_token'],
              401: ['invalid_credentials', 'unauthorized', 'token_expired', 'session_revoked'],
              403: ['account_disabled'],
              429: ['rate_limited', 'account_locked'],
            },
            description:
              'Spends the token from the verify_email mail (valid 24 hours). 400 `invalid_token` when unknown, expired or used. ' +
              "Send the account's access token (Authorization: Bearer) or its `password` to keep the password and sessions; without either, " +
              "the first confirmation hands the account to the mailbox's owner: every session ends and the password set before is cleared " +
              '(docs/auth.md, Account ownership). A wrong password → 401 `invalid_credentials` (counts toward the lockout; the token stays usable). ' +
              '429 `rate_limited` past auth.rate_limit_token_per_ip (default 10/min, shared with password/reset).',
          },
        },
      )
      .post(
        '/verify-email/resend',
        async ({ body, request }) => {
          await auth().resendVerification(body.email, meta(request));
          return ok(request, {
            message: 'If this address has an unverified account, a new verification link is on its way.',
          });
        },
        {
          body: Bodies.resend,
          response: { 200: Responses.done, ...errors(422, 429, 503) },
          detail: {
            summary: 'Send the verification mail again',
            'x-codes': { 429: ['rate_limited'], 503: ['mail_not_configured'] },
            description:
              'Always 200 for any address (no account enumeration); 503 `mail_not_configured` when the site has no mail; 429 past auth.rate_limit_email_per_ip.',
          },
        },
      )
      .use(signInRoutes(p, area))
  );
}
