/**
 * CSRF defence in layers for every state-changing admin request (docs/admin-api.md
 * §Sessions and CSRF). SameSite=Strict on the cookie is the first; these are the next:
 *  1. Fetch Metadata: `Sec-Fetch-Site` must be `same-origin` or `none`; a browser that
 *     sends none must send no foreign `Origin`.
 *  2. With a session, `X-CSRF-Token` must equal the session's token (constant time).
 */
import { AdminErrors } from './errors';
import { sameString } from './secret-token';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function changesState(method: string): boolean {
  return !SAFE_METHODS.has(method.toUpperCase());
}

/**
 * Layer 1. `allowedHosts` are the hosts this listener is known by beyond the request's
 * own Host header (web.main_base_url behind a proxy that rewrites Host).
 */
export function checkFetchMetadata(headers: Headers, allowedHosts: string[] = []): void {
  const site = headers.get('sec-fetch-site');
  if (site !== null) {
    if (site !== 'same-origin' && site !== 'none')
      throw AdminErrors.csrfFailed(`Sec-Fetch-Site is '${site.slice(0, 32)}'`);
    return;
  }
  const origin = headers.get('origin');
  if (origin === null) return; // not a browser, or a browser that sends neither (same-origin by construction)
  let host: string;
  try {
    host = new URL(origin).host.toLowerCase();
  } catch {
    throw AdminErrors.csrfFailed('the Origin header is not a URL');
  }
  const own = (headers.get('host') ?? '').toLowerCase();
  if (host !== own && !allowedHosts.includes(host)) throw AdminErrors.csrfFailed('the Origin is another site');
}

/** Layer 2. */
export function checkCsrfToken(headers: Headers, expected: string): void {
  const sent = headers.get('x-csrf-token');
  if (!sent)
    throw AdminErrors.csrfFailed('the X-CSRF-Token header is missing (send the csrf_token from sign-in or /auth/me)');
  if (!sameString(sent, expected)) throw AdminErrors.csrfFailed('the X-CSRF-Token header does not match this session');
}
