/**
 * The API key checks every area uses (docs/api-keys.md), built from two narrow inputs:
 * a key verifier (the keys module) and a reader of the access mode (the live setting
 * web.public_api_access_mode). Routes use them through the guard plugin
 * (src/http/guards.ts); the functions here are the same checks for code that only
 * holds a Request (extension lookups).
 *
 * @example
 * const keys = keyChecks({ verify, accessMode });
 * const principal = await keys.require(request, { permission: 'db:query' });
 */
import { Errors, type AppError } from './errors';
import { requestInfo } from './request-info';

export type Permission = 'mail:send' | 'db:query' | 'files:upload' | 'files:download';

export interface ApiKeyPrincipal {
  id: string;
  type: 'public' | 'service';
  service: string | null;
  permissions: string[];
  tables: string[];
}

/** The raw X-API-Key value → its active key, or null (unknown, revoked, expired, malformed). */
export type KeyVerifier = (raw: string) => Promise<ApiKeyPrincipal | null>;
export type AccessMode = 'open' | 'api_key_required';

export interface KeyGuardInputs {
  verify: KeyVerifier;
  /** The access mode now (read on every request, so a change applies at once). */
  accessMode: () => AccessMode;
}

export interface KeyNeed {
  /** The permission the key must carry (omitted = any active key). */
  permission?: Permission;
  /**
   * The route is under a public prefix the access mode governs (the Database API):
   * in `api_key_required` mode a missing key answers 401 `api_key_required` there, as
   * on every public prefix (docs/api-keys.md). Off for mail and files, which live on the
   * main listener, where a missing key is always 401 `unauthorized`.
   */
  publicPrefix?: boolean;
}

export interface KeyChecks {
  /**
   * X-API-Key → principal. 401 `unauthorized` when missing (`api_key_required` on a
   * public prefix in that mode) or unknown/revoked/expired; 403 `forbidden` when it
   * lacks `need.permission`.
   */
  require(request: Request, need?: KeyNeed): Promise<ApiKeyPrincipal>;
  /**
   * Access-mode gate for public prefixes (auth, runtime config, modules): in
   * `api_key_required` mode an active key must be present (missing → 401
   * `api_key_required`, invalid → 401 `unauthorized`); in `open` mode the principal if
   * a valid key was sent, else null.
   */
  publicAccess(request: Request): Promise<ApiKeyPrincipal | null>;
}

const HEADER = 'x-api-key';

/** `mail:*` covers `mail:send`, `db:*` covers `db:query`, `files:*` covers both files permissions. */
export function hasPermission(principal: ApiKeyPrincipal, permission: Permission): boolean {
  const family = permission.slice(0, permission.indexOf(':'));
  return principal.permissions.includes(permission) || principal.permissions.includes(`${family}:*`);
}

/** 403 `forbidden` naming the permission when `principal` lacks it. */
export function requirePermission(principal: ApiKeyPrincipal, permission: Permission): void {
  if (!hasPermission(principal, permission))
    throw Errors.forbidden(`This API key lacks the '${permission}' permission.`);
}

/** Whether the request carries the header at all (an empty one included). */
export function sendsApiKey(request: Request): boolean {
  return request.headers.has(HEADER);
}

function presentedKey(request: Request): string | null {
  const v = request.headers.get(HEADER);
  return v === null ? null : v.trim();
}

const invalidKey = () => Errors.unauthorized('The API key is invalid, revoked or expired.');

export function keyChecks({ verify, accessMode }: KeyGuardInputs): KeyChecks {
  /** 401 for a request without X-API-Key (see `KeyNeed.publicPrefix` for which code). */
  const missingKey = (need?: KeyNeed): AppError =>
    need?.publicPrefix && accessMode() === 'api_key_required'
      ? Errors.apiKeyRequired()
      : Errors.unauthorized('This endpoint needs an API key in the X-API-Key header.');
  return {
    async require(request, need) {
      const raw = presentedKey(request);
      if (!raw) throw missingKey(need);
      const principal = await verify(raw);
      if (!principal) throw invalidKey();
      requestInfo(request).keyId = principal.id;
      if (need?.permission) requirePermission(principal, need.permission);
      return principal;
    },
    async publicAccess(request) {
      const raw = presentedKey(request);
      if (accessMode() === 'api_key_required') {
        if (!raw)
          throw Errors.apiKeyRequired(
            'This API requires an API key: send the site public key in the X-API-Key header.',
          );
        const principal = await verify(raw);
        if (!principal) throw invalidKey();
        requestInfo(request).keyId = principal.id;
        return principal;
      }
      const principal = raw ? await verify(raw) : null;
      if (principal) requestInfo(request).keyId = principal.id;
      return principal;
    },
  };
}
