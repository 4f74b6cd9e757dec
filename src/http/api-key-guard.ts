/**
 * The API key guards every area uses (docs/api-keys.md): `requireApiKey` for routes that
 * need a key with a permission (mail, database, files; the Database API passes
 * `publicPrefix` because the access mode governs it too), `publicAccess` for the
 * public prefixes where any active key will do (auth, runtime config, modules).
 *
 * @example
 * const principal = await requireApiKey(p, request, 'db:query');
 * if (!principal.tables.includes(entity)) throw Errors.forbidden(...);
 */
import type { Platform } from '../platform';
import { AppError, Errors } from './errors';

export type Permission = 'mail:send' | 'db:query' | 'files:upload' | 'files:download';

export interface ApiKeyPrincipal {
  id: string;
  type: 'public' | 'service';
  service: string | null;
  permissions: string[];
  tables: string[];
}

const HEADER = 'x-api-key';

/** `mail:*` covers `mail:send`, `db:*` covers `db:query`, `files:*` covers both files permissions. */
export function hasPermission(principal: ApiKeyPrincipal, permission: Permission): boolean {
  const family = permission.slice(0, permission.indexOf(':'));
  return principal.permissions.includes(permission) || principal.permissions.includes(`${family}:*`);
}

function presentedKey(request: Request): string | null {
  const v = request.headers.get(HEADER);
  return v === null ? null : v.trim();
}

export interface KeyCheck {
  /**
   * The route is under a public prefix the access mode governs (the Database API):
   * in `api_key_required` mode a missing key answers 401 `api_key_required` there, as
   * on every public prefix (docs/api-keys.md). Off for mail and files, which live on the
   * main listener, where a missing key is always 401 `unauthorized`.
   */
  publicPrefix?: boolean;
}

/** 401 for a request without X-API-Key (see `KeyCheck.publicPrefix` for which code). */
function missingKey(p: Platform, opts?: KeyCheck): AppError {
  if (opts?.publicPrefix && p.settings.get<string>('web.public_api_access_mode') === 'api_key_required') {
    return new AppError(401, 'api_key_required', 'This API requires an API key in the X-API-Key header.');
  }
  return Errors.unauthorized('This endpoint needs an API key in the X-API-Key header.');
}

/**
 * X-API-Key → principal. 401 `unauthorized` when missing (`api_key_required` on a
 * public prefix in that mode) or unknown/revoked/expired; 403 `forbidden` when it
 * lacks `permission` (omitted = any active key).
 */
export async function requireApiKey(p: Platform, request: Request, permission?: Permission, opts?: KeyCheck): Promise<ApiKeyPrincipal> {
  const raw = presentedKey(request);
  if (!raw) throw missingKey(p, opts);
  const principal = await p.services.keys.verify(raw);
  if (!principal) throw Errors.unauthorized('The API key is invalid, revoked or expired.');
  if (permission) requirePermission(principal, permission);
  return principal;
}

/** 403 `forbidden` naming the permission when `principal` lacks it. */
export function requirePermission(principal: ApiKeyPrincipal, permission: Permission): void {
  if (!hasPermission(principal, permission)) throw Errors.forbidden(`This API key lacks the '${permission}' permission.`);
}

/**
 * Access-mode gate for public prefixes (auth, runtime config, modules): in
 * `api_key_required` mode an active key must be present (missing → 401
 * `api_key_required`, invalid → 401 `unauthorized`); in `open` mode returns the
 * principal if a valid key was sent, else null. Reads the live setting
 * web.public_api_access_mode each call.
 */
export async function publicAccess(p: Platform, request: Request): Promise<ApiKeyPrincipal | null> {
  const raw = presentedKey(request);
  if (p.settings.get<string>('web.public_api_access_mode') === 'api_key_required') {
    if (!raw) throw new AppError(401, 'api_key_required', 'This API requires an API key: send the site public key in the X-API-Key header.');
    const principal = await p.services.keys.verify(raw);
    if (!principal) throw Errors.unauthorized('The API key is invalid, revoked or expired.');
    return principal;
  }
  return raw ? p.services.keys.verify(raw) : null;
}
