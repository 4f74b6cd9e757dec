/**
 * The API key guards every area uses (CONTRACT §6): `requireApiKey` for routes that
 * need a key with a permission (mail, database, files), `publicAccess` for the public
 * prefixes the access mode governs (auth, runtime config, modules).
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

/**
 * X-API-Key → principal. 401 `unauthorized` when missing/unknown/revoked/expired;
 * 403 `forbidden` when it lacks `permission` (omitted = any active key).
 */
export async function requireApiKey(p: Platform, request: Request, permission?: Permission): Promise<ApiKeyPrincipal> {
  const raw = presentedKey(request);
  if (!raw) throw Errors.unauthorized('This endpoint needs an API key in the X-API-Key header.');
  const principal = await p.services.keys.verify(raw);
  if (!principal) throw Errors.unauthorized('The API key is invalid, revoked or expired.');
  if (permission && !hasPermission(principal, permission)) {
    throw Errors.forbidden(`This API key lacks the '${permission}' permission.`);
  }
  return principal;
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
