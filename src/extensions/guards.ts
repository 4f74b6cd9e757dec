/**
 * Guards for extension routes: the platform's API key and user-token checks, in
 * the two shapes an author needs — a `beforeHandle` hook that only admits, and a
 * lookup that returns who is calling.
 */
import type { Platform } from '../platform';
import { requireApiKey, type ApiKeyPrincipal, type Permission } from '../http/api-key-guard';
import { requireUser, type RequestUser as UserPrincipal } from '../http/user-guard';

export type { ApiKeyPrincipal, Permission, UserPrincipal };

type Hook = (c: { request: Request }) => Promise<void>;

export interface ExtensionGuards {
  /**
   * `beforeHandle` hook: the request needs `X-API-Key` with `permission`
   * (401 unauthorized without a valid key, 403 forbidden without the permission).
   *
   * @example
   * ctx.routes.post('/import', handler, { beforeHandle: ctx.requireApiKey('db:query') })
   */
  requireApiKey(permission?: Permission): Hook;
  /**
   * `beforeHandle` hook: the request needs `Authorization: Bearer <access token>` of a
   * signed-in site user (401 unauthorized otherwise).
   */
  requireUser(): Hook;
  /** The calling key (same rules as `requireApiKey`). */
  apiKey(request: Request, permission?: Permission): Promise<ApiKeyPrincipal>;
  /** The signed-in user `{ userId, sessionId, email }` (same rules as `requireUser`). */
  user(request: Request): Promise<UserPrincipal>;
}

export function extensionGuards(p: Platform): ExtensionGuards {
  return {
    requireApiKey: (permission) => async ({ request }) => void (await requireApiKey(p, request, permission)),
    requireUser: () => async ({ request }) => void (await requireUser(p, request)),
    apiKey: (request, permission) => requireApiKey(p, request, permission),
    user: (request) => requireUser(p, request),
  };
}
