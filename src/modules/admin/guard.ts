/**
 * The admin API's gate (docs/admin-api.md §Sessions and CSRF), a `derive`, which Elysia
 * runs before body validation, so it answers before anything about a body:
 * state-changing requests pass Fetch Metadata first (403 `csrf_failed`), then every
 * route but state/setup/login needs a live session (401 `unauthorized`), then the
 * session's CSRF token (403). A handler receives the signed-in administrator as
 * `admin` on its context, as other areas' handlers receive `apiKey`/`user`.
 */
import type { Basalt } from '../../services';
import { pathOf } from '../../http/envelope';
import { requestInfo } from '../../http/request-info';
import type { Actor } from './audit';
import { changesState, checkCsrfToken, checkFetchMetadata } from './csrf';
import { AdminErrors } from './errors';
import type { LiveSession } from './sessions';
import type { ClientMeta } from './service';

export const COOKIE = 'basalt_admin';
/** Over HTTPS the cookie is `__Host-` prefixed: Secure, no Domain, Path=/ — browsers enforce it. */
export const SECURE_COOKIE = '__Host-basalt_admin';

/** Routes that work without a session (still CSRF layer 1 when they change state), below the admin area's root. */
const OPEN = ['/auth/state', '/auth/setup', '/auth/login'];

export interface AdminRequest {
  session: LiveSession;
  actor: Actor;
  /** Came over HTTPS (the cookie's name and attributes follow). */
  https: boolean;
}

/** The session cookie's token; the `__Host-` one wins when both are sent. */
export function cookieToken(headers: Headers): string | undefined {
  const raw = headers.get('cookie');
  if (!raw) return undefined;
  let plain: string | undefined;
  for (const part of raw.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === SECURE_COOKIE) return value;
    if (name === COOKIE) plain ??= value;
  }
  return plain;
}

export function sessionCookie(token: string, https: boolean, maxAgeSeconds: number): string {
  return `${https ? SECURE_COOKIE : COOKIE}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${https ? '; Secure' : ''}`;
}

export function clearedCookie(https: boolean): string {
  return `${https ? SECURE_COOKIE : COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${https ? '; Secure' : ''}`;
}

export function isHttps(request: Request): boolean {
  return requestInfo(request).https ?? request.url.startsWith('https:');
}

export function clientMeta(request: Request): ClientMeta {
  const info = requestInfo(request);
  return { ip: info.ip, userAgent: request.headers.get('user-agent'), requestId: info.id };
}

/** Hosts the main listener is known by besides the Host header (web.main_base_url behind a proxy). */
function knownHosts(p: Basalt): string[] {
  const base = p.settings.get('web.main_base_url');
  if (!base) return [];
  try {
    return [new URL(base).host.toLowerCase()];
  } catch {
    return [];
  }
}

/**
 * The administrator a signed-in route's handler acts for. `admin` is optional on the
 * context because the open routes (state, setup, login) pass the same gate without a
 * session; the gate admits no request to any other route without one.
 */
export function signedIn(admin: AdminRequest | undefined): AdminRequest {
  if (!admin) throw AdminErrors.unauthorized();
  return admin;
}

export function adminGuard(p: Basalt, root: string) {
  const open = new Set(OPEN.map((path) => root + path));
  /** `admin`: the signed-in administrator (absent on the open routes). */
  return async function adminGate({ request }: { request: Request }): Promise<{ admin?: AdminRequest }> {
    const mutating = changesState(request.method);
    if (mutating) checkFetchMetadata(request.headers, knownHosts(p));
    if (open.has(pathOf(request.url))) return {};
    const session = await p.services.admin.session(cookieToken(request.headers));
    if (!session) throw AdminErrors.unauthorized();
    if (mutating) checkCsrfToken(request.headers, session.csrfToken);
    const meta = clientMeta(request);
    return {
      admin: {
        session,
        https: isHttps(request),
        actor: {
          adminId: session.adminId,
          email: session.email,
          ip: meta.ip,
          userAgent: meta.userAgent,
          requestId: meta.requestId,
        },
      },
    };
  };
}
