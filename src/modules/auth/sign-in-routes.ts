/**
 * Routes of the sign-in methods beyond passwords (docs/auth.md), mounted by the Public
 * Auth routes (routes.ts) under /api/v1/auth. HTTP only.
 *
 * Two groups: the provider redirects (`oauth/<name>/start`, `oauth/<name>/callback`) are
 * browser navigations, which cannot carry X-API-Key, so they are outside the access-mode
 * gate (the exchange that yields tokens is inside it); everything else is gated like the
 * other auth routes.
 */
import { Elysia, t } from 'elysia';
import type { Basalt } from '../../services';
import { platformGuards } from '../../guards';
import { requestInfo } from '../../http/request-info';
import { successResponse } from '../../http/envelope';
import { errorsOf } from '../../http/envelope-schemas';
import { rootOf, type AreaFacts } from '../../http/areas';
import { SignInBodies, SignInQuery, SignInResponses } from './sign-in-model';
import { FLOW_SECONDS, LINK_COOKIE, OAUTH_COOKIE, type LinkConfirmation } from './oauth-flow';
import type { ClientMeta } from './service';

const bearer = [{ Bearer: [] }];
const Name = t.Object({ name: t.String({ maxLength: 40, description: 'Provider name from auth.oauth_providers.' }) });

/** What the services need to know of the request (client address through web.trusted_proxies). */
export function meta(request: Request): ClientMeta {
  return {
    ip: requestInfo(request).ip,
    userAgent: request.headers.get('user-agent'),
    origin: new URL(request.url).origin,
  };
}

function cookie(request: Request, name: string): string | undefined {
  for (const part of (request.headers.get('cookie') ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** A redirect (302, or 303 after a form post) setting `cookies`; no Referer leaves with it (the provider's code is in the callback's query). */
function redirect(location: string, cookies: string[] = [], status = 302): Response {
  const headers = new Headers({ location, 'referrer-policy': 'no-referrer' });
  for (const c of cookies) headers.append('set-cookie', c);
  return new Response(null, { status, headers });
}

/**
 * A cookie of the provider flow: HttpOnly (no script reads it), SameSite=Lax (sent on the
 * provider's top-level redirect back, never on cross-site subrequests or form posts),
 * Secure over https, living as long as the flow (`maxAge` 0 clears it).
 */
function flowCookie(request: Request, name: string, value: string, path: string, maxAge = FLOW_SECONDS): string {
  return [
    `${name}=${value}`,
    `Path=${path}`,
    `Max-Age=${maxAge}`,
    'HttpOnly',
    'SameSite=Lax',
    ...(requestInfo(request).https ? ['Secure'] : []),
  ].join('; ');
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The callback's confirmation page of a linking flow (docs/auth.md, Linking): whose
 * provider account joins which account, and two buttons posting back to the callback
 * with the page's token (an empty form body: the token is in the action's query). Not
 * framable; forms may post only here and be redirected only to `redirect_to`'s origin.
 */
function confirmPage(c: LinkConfirmation): Response {
  const provider = escapeHtml(c.provider);
  const them = c.providerEmail ? escapeHtml(c.providerEmail) : '(no address)';
  const you = escapeHtml(c.accountEmail);
  const button = (query: string, label: string) =>
    `<form method="post" action="?${escapeHtml(query)}"><button type="submit">${label}</button></form>`;
  const token = new URLSearchParams({ confirm: c.token });
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Link ${provider} account?</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 3em auto; line-height: 1.5">
<h1>Link ${provider} account ${them} to ${you}?</h1>
<p>Signing in with this ${provider} account will then open the account <strong>${you}</strong>.
If you did not ask for this from that account, cancel.</p>
${button(token.toString(), `Link to ${you}`)}
${button(`${token}&decline=1`, 'Cancel')}
</body></html>`;
  return new Response(html, {
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
      'x-frame-options': 'DENY',
      'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ${new URL(c.redirectTo).origin}; frame-ancestors 'none'; base-uri 'none'`,
    },
  });
}

/**
 * Where browsers reach the public API: web.public_base_url, else the origin of
 * `publicRequest`, a request that came in on the public API's listener; '' when neither.
 */
function apiBase(p: Basalt, publicRequest?: Request): string {
  const configured = p.settings.get('web.public_base_url').replace(/\/$/, '');
  return configured || (publicRequest ? new URL(publicRequest.url).origin : '');
}

/**
 * Where a provider sends the browser back, the `redirect_uri` to register at the provider:
 * `<base><authRoot>/oauth/<name>/callback`, `<base>` as {@link apiBase} finds it. The start
 * route registers it with each flow; the admin provider check shows it. `publicRequest` is
 * a request that came in on the listener serving the public API; without one (the admin
 * API on the main listener while the public API has its own) only web.public_base_url
 * tells the base, and with it empty the URL is not known: null.
 */
export function oauthCallbackUrl(p: Basalt, authRoot: string, name: string, publicRequest: Request): string;
export function oauthCallbackUrl(
  p: Basalt,
  authRoot: string,
  name: string,
  publicRequest: Request | undefined,
): string | null;
export function oauthCallbackUrl(
  p: Basalt,
  authRoot: string,
  name: string,
  publicRequest: Request | undefined,
): string | null {
  const base = apiBase(p, publicRequest);
  return base ? `${base}${authRoot}/oauth/${name}/callback` : null;
}

/** The provider redirects: browser navigations, outside the access-mode gate. `root` is /api/v1/auth. */
export function oauthBrowserRoutes(p: Basalt, area: AreaFacts) {
  const root = rootOf(area);
  const errors = errorsOf(area);
  const flows = () => p.services.auth.oauth;
  return new Elysia({ name: 'basalt.auth.oauth-browser' })
    .get(
      '/oauth/:name/start',
      async ({ params, query, request }) => {
        const { location, binding, linkBinding } = await flows().start(params.name, {
          redirectTo: query.redirect_to,
          link: query.link,
          binding: cookie(request, OAUTH_COOKIE),
          callbackUrl: oauthCallbackUrl(p, root, params.name, request),
        });
        // Scoped to the provider routes; a linking flow's own cookie to its callback (and confirmation).
        const cookies = [flowCookie(request, OAUTH_COOKIE, binding, `${root}/oauth/`)];
        if (linkBinding)
          cookies.push(flowCookie(request, LINK_COOKIE, linkBinding, `${root}/oauth/${params.name}/callback`));
        return redirect(location, cookies);
      },
      {
        params: Name,
        query: SignInQuery.start,
        detail: {
          summary: 'Start a provider sign-in (browser navigation)',
          'x-codes': {
            400: ['invalid_redirect', 'invalid_link_ticket'],
            404: ['provider_not_found'],
            502: ['provider_unavailable'],
          },
          responses: {
            302: {
              description: "To the provider's authorization endpoint, with the flow's binding cookie.",
              headers: {
                Location: { schema: { type: 'string' } },
                'Set-Cookie': { schema: { type: 'string' }, description: `${OAUTH_COOKIE}=…; HttpOnly; SameSite=Lax` },
              },
            },
          },
          description:
            'Navigate the browser here (no X-API-Key needed, in any access mode). 302 to the provider with state, nonce (OpenID Connect) and PKCE S256; ' +
            `sets the HttpOnly, SameSite=Lax cookie ${OAUTH_COOKIE} (${FLOW_SECONDS / 60} min, path ${root}/oauth/) that binds the flow to this browser. ` +
            '`redirect_to` must be allowed by auth.redirect_allowlist → else 400 `invalid_redirect`. `link`: the ticket from POST oauth/{name}/link.',
        },
        response: { ...errors(400, 404, 422, 502) },
      },
    )
    .get(
      '/oauth/:name/callback',
      async ({ params, request }) => {
        const r = await flows().callback(
          params.name,
          new URL(request.url).searchParams,
          cookie(request, OAUTH_COOKIE),
          cookie(request, LINK_COOKIE),
        );
        return typeof r === 'string' ? redirect(r) : confirmPage(r);
      },
      {
        params: Name,
        query: SignInQuery.callback,
        detail: {
          summary: "The provider's redirect back (browser navigation)",
          'x-codes': { 400: ['invalid_state'] },
          responses: {
            200: {
              description:
                'Linking: the confirmation page (HTML), "Link <provider> account <address> to <your account>?", whose buttons post back here.',
              content: { 'text/html': { schema: { type: 'string' } } },
            },
            302: {
              description: 'To redirect_to with #code=, #linked= or #error= in the fragment.',
              headers: { Location: { schema: { type: 'string' } } },
            },
          },
          description:
            "The provider sends the browser here. 302 to the flow's redirect_to with `#code=<exchange code>` (60 s, single use: POST oauth/exchange), " +
            'or `#error=<code>`: access_denied, invalid_state (another browser, or the cookie is gone), provider_error, ' +
            'provider_not_found, account_exists (registered meanwhile), identity_taken, email_required, ' +
            'email_not_verified (the provider does not vouch for the address: it never creates or links an account), registration_closed, account_disabled, email_mixed_scripts. ' +
            `A linking flow needs its ${LINK_COOKIE} cookie too, and answers 200 with a confirmation page instead of linking (\`#linked=<provider>\` at once when it is already linked to you). ` +
            'A state that names no live flow → 400 `invalid_state` (nowhere trusted to go).',
        },
        response: { ...errors(400, 422) },
      },
    )
    .post(
      '/oauth/:name/callback',
      async ({ params, query, request }) => {
        const location = await flows().confirmLink(
          params.name,
          query.confirm,
          cookie(request, LINK_COOKIE),
          query.decline !== undefined,
        );
        const path = `${root}/oauth/${params.name}/callback`;
        return redirect(location, [flowCookie(request, LINK_COOKIE, '', path, 0)], 303);
      },
      {
        params: Name,
        query: SignInQuery.confirmLink,
        detail: {
          summary: 'Confirm or decline linking a provider (the confirmation page posts here)',
          'x-codes': { 400: ['invalid_link_confirmation'] },
          responses: {
            303: {
              description:
                'To redirect_to with #linked=<provider>, #error=access_denied (declined) or #error=identity_taken.',
              headers: { Location: { schema: { type: 'string' } } },
            },
          },
          description:
            `Posted by the callback's confirmation page (an empty form body; \`confirm\` is the page's token). Needs the ${LINK_COOKIE} cookie of the flow, ` +
            'which a cross-site form post does not carry (SameSite=Lax); single use. Otherwise → 400 `invalid_link_confirmation`.',
        },
        response: { ...errors(400, 422) },
      },
    );
}

/** The gated routes: e-mail codes, exchange, second factor, identities. */
export function signInRoutes(p: Basalt, area: AreaFacts) {
  const root = rootOf(area);
  const errors = errorsOf(area);
  const auth = () => p.services.auth;
  const ok = (request: Request, data: unknown, status = 200) => successResponse(request, data, { status });
  return new Elysia({ name: 'basalt.auth.sign-in' })
    .use(platformGuards(p, p.services))
    .guard({ publicAccess: true })
    .post(
      '/otp/request',
      async ({ body, request }) => {
        await auth().methods.requestEmailCode(body.email, meta(request));
        return ok(request, { message: 'If this address can sign in, a code is on its way.' }, 202);
      },
      {
        body: SignInBodies.otpRequest,
        response: { 202: SignInResponses.accepted, ...errors(422, 429, 503) },
        detail: {
          summary: 'Mail a sign-in code',
          'x-codes': { 429: ['rate_limited'], 503: ['mail_not_configured'] },
          description:
            '202 whether or not the address has an account (no enumeration; the mail work runs after the answer). Mails a 6-digit code (template auth.otp), ' +
            'valid 10 minutes, to an existing enabled account, or to any address while auth.registration_open is on (the code then creates the account). ' +
            'A new request replaces the previous code. 429 past auth.rate_limit_email_per_ip, or past auth.rate_limit_login_per_account requests for one address.',
        },
      },
    )
    .post(
      '/otp/verify',
      async ({ body, request }) =>
        ok(request, await auth().methods.verifyEmailCode(body.email, body.code, meta(request))),
      {
        body: SignInBodies.otpVerify,
        response: { 200: SignInResponses.signIn, ...errors(400, 401, 403, 422, 429) },
        detail: {
          summary: 'Sign in with a mailed code',
          'x-codes': {
            400: ['email_mixed_scripts'],
            401: ['invalid_code'],
            403: ['account_disabled', 'registration_closed'],
            429: ['rate_limited', 'account_locked'],
          },
          description:
            'The login answer (or the MFA step). Marks the address verified. A wrong code → 401 `invalid_code`; the fifth wrong code burns it (request a new one). ' +
            'Wrong codes count toward the lockout like wrong passwords (auth.lockout_threshold per address and client address, the backstop across addresses): a locked-out client address → 429 `account_locked`, even with the right code. ' +
            'Rate limited per IP (auth.rate_limit_login_per_ip) and per address from one client address (auth.rate_limit_login_per_account), like login.',
        },
      },
    )
    .post(
      '/oauth/exchange',
      async ({ body, request }) => ok(request, await auth().oauth.exchange(body.code, meta(request))),
      {
        body: SignInBodies.exchange,
        response: { 200: SignInResponses.signIn, ...errors(400, 403, 422, 429) },
        detail: {
          summary: "Trade a callback's exchange code for the sign-in",
          'x-codes': { 400: ['invalid_exchange_code'], 403: ['account_disabled'], 429: ['rate_limited'] },
          description:
            'The same answer as a password login: tokens, or `{mfa_required, mfa_token}`. The code works once, within 60 s; a replay → 400 `invalid_exchange_code`.',
        },
      },
    )
    .post(
      '/oauth/:name/link',
      async ({ params, body, user, request }) => {
        const ticket = await auth().oauth.linkTicket(user, params.name, body.redirect_to);
        const start = new URL(`${apiBase(p, request)}${root}/oauth/${params.name}/start`);
        start.searchParams.set('redirect_to', body.redirect_to);
        start.searchParams.set('link', ticket);
        return ok(request, { url: start.href });
      },
      {
        user: true,
        params: Name,
        body: SignInBodies.link,
        response: { 200: SignInResponses.link, ...errors(400, 401, 403, 404, 422) },
        detail: {
          summary: 'Link a provider to the signed-in user',
          'x-codes': {
            400: ['invalid_redirect'],
            401: ['unauthorized', 'token_expired', 'session_revoked'],
            403: ['account_disabled'],
            404: ['provider_not_found'],
          },
          description:
            'Returns the start URL of a linking flow (with a single-use 60 s ticket, not a token). The browser comes back with `#linked=<provider>`, ' +
            'or `#error=identity_taken` when that provider account belongs to another user.',
          security: bearer,
        },
      },
    )
    .get('/identities', async ({ user, request }) => ok(request, await auth().methods.methods(user.userId)), {
      user: true,
      response: { 200: SignInResponses.methods, ...errors(401, 403) },
      detail: {
        summary: "The signed-in user's ways to sign in",
        'x-codes': { 401: ['unauthorized', 'token_expired', 'session_revoked'], 403: ['account_disabled'] },
        description:
          'Linked providers, whether a password is set, whether TOTP is on and how many recovery codes are left.',
        security: bearer,
      },
    })
    .delete(
      '/identities/:id',
      async ({ params, user, request }) => {
        await auth().methods.unlink(user.userId, params.id);
        return ok(request, await auth().methods.methods(user.userId));
      },
      {
        user: true,
        params: t.Object({ id: t.String({ maxLength: 100 }) }),
        response: { 200: SignInResponses.methods, ...errors(401, 403, 404, 409) },
        detail: {
          summary: 'Unlink a provider',
          'x-codes': {
            401: ['unauthorized', 'token_expired', 'session_revoked'],
            403: ['account_disabled'],
            404: ['identity_not_found'],
            409: ['last_sign_in_method'],
          },
          description:
            'Never the last way to sign in: without a password and another provider → 409 `last_sign_in_method`. Answers the remaining methods.',
          security: bearer,
        },
      },
    )
    .post('/mfa/totp/enroll', async ({ user, request }) => ok(request, await auth().methods.enrollTotp(user)), {
      user: true,
      response: { 200: SignInResponses.enroll, ...errors(401, 403, 409) },
      detail: {
        summary: 'Start TOTP enrolment',
        'x-codes': {
          401: ['unauthorized', 'token_expired', 'session_revoked'],
          403: ['account_disabled'],
          409: ['mfa_already_enabled'],
        },
        description:
          'A new secret (not yet active); confirm it with a code from the app. Enrolling again before confirming replaces it.',
        security: bearer,
      },
    })
    .post(
      '/mfa/totp/confirm',
      async ({ body, user, request }) => ok(request, await auth().methods.confirmTotp(user, body.code)),
      {
        user: true,
        body: SignInBodies.code,
        response: { 200: SignInResponses.recoveryCodes, ...errors(400, 401, 403, 409, 422) },
        detail: {
          summary: 'Turn TOTP on',
          'x-codes': {
            400: ['mfa_not_enrolled'],
            401: ['unauthorized', 'token_expired', 'session_revoked', 'invalid_code'],
            403: ['account_disabled'],
            409: ['mfa_already_enabled'],
          },
          description:
            "With a current code of the enrolled secret: TOTP is on from now, every login asks for it, and the user's other sessions end (this one stays). Answers 10 recovery codes, shown only this once.",
          security: bearer,
        },
      },
    )
    .delete(
      '/mfa/totp',
      async ({ body, user, request }) => {
        await auth().methods.disableTotp(user, body.code, meta(request));
        return ok(request, { message: 'The second factor is off.' });
      },
      {
        user: true,
        body: SignInBodies.code,
        response: { 200: SignInResponses.done, ...errors(400, 401, 403, 422, 429) },
        detail: {
          summary: 'Turn TOTP off',
          'x-codes': {
            400: ['mfa_not_enabled'],
            401: ['unauthorized', 'token_expired', 'session_revoked', 'invalid_code'],
            403: ['account_disabled'],
            429: ['account_locked'],
          },
          description:
            'Needs a current code; wrong codes count toward the account lockout. Recovery codes are dropped too.',
          security: bearer,
        },
      },
    )
    .post(
      '/mfa/verify',
      async ({ body, request }) => ok(request, await auth().methods.verifyMfa(body, meta(request))),
      {
        body: SignInBodies.mfaVerify,
        response: { 200: SignInResponses.session, ...errors(401, 403, 422, 429) },
        detail: {
          summary: 'Second step of a sign-in',
          'x-codes': {
            401: ['invalid_mfa_token', 'invalid_code'],
            403: ['account_disabled'],
            429: ['rate_limited', 'account_locked'],
          },
          description:
            'The mfa_token from the login answer with `code` (TOTP) or `recovery_code` → the login answer with tokens whose `amr` ends in totp or recovery and `aal` is 2. ' +
            'A code is accepted once; wrong codes count toward the account lockout (429 `account_locked`). The mfa_token stays valid for its 5 minutes until a right code spends it.',
        },
      },
    );
}
