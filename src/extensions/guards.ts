/**
 * Guards for extension routes (docs/extensions.md), built from the guards' narrow
 * inputs (src/http/guards.ts), never the platform. An extension's route groups
 * (`ctx.routes`, `ctx.claim(prefix)`) carry the platform's guard macros, so a route
 * receives its caller as core routes do:
 *
 * @example
 * ctx.routes.post('/import', ({ apiKey }) => …, { apiKey: 'db:query' })
 * ctx.claim('/api/v1/files').get('', ({ user, apiKey }) => …, { userOrApiKey: 'files:download' })
 *
 * The earlier shapes stay for extensions written against them: `beforeHandle` hooks that
 * only admit, and lookups that return who is calling.
 */
import { Elysia } from 'elysia';
import { keyChecks, type ApiKeyPrincipal, type Permission } from '../http/api-key-guard';
import { guards, type GuardInputs } from '../http/guards';
import { requestUser, type RequestUser as UserPrincipal } from '../http/user-guard';

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
  /** The signed-in user `{ userId, sessionId, email, amr, aal }` (same rules as `requireUser`). */
  user(request: Request): Promise<UserPrincipal>;
}

export function extensionGuards(inputs: GuardInputs): ExtensionGuards {
  const keys = keyChecks(inputs);
  const apiKey = (request: Request, permission?: Permission) => keys.require(request, { permission });
  const user = (request: Request) => requestUser(inputs.authenticate, request);
  return {
    requireApiKey:
      (permission) =>
      async ({ request }) =>
        void (await apiKey(request, permission)),
    requireUser:
      () =>
      async ({ request }) =>
        void (await user(request)),
    apiKey,
    user,
  };
}

/** An extension's route group at `prefix`, with the guard macros (`apiKey`, `user`, `userOrApiKey`, …). */
export function guardedGroup(prefix: string, inputs: GuardInputs) {
  return new Elysia({ prefix }).use(guards(inputs));
}

/**
 * `ctx.routes`: module routes are a public prefix, so the access-mode gate comes first
 * (docs/api-keys.md), before anything about the request is answered; a route's own guard
 * applies on top.
 */
export function moduleGroup(prefix: string, inputs: GuardInputs) {
  return guardedGroup(prefix, inputs).guard({ publicAccess: true });
}

/** A claimed core prefix (`ctx.claim`). */
export type ExtensionApp = ReturnType<typeof guardedGroup>;
/** The module routes (`ctx.routes`). */
export type ModuleApp = ReturnType<typeof moduleGroup>;
