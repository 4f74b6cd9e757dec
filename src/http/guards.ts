/**
 * The guards: one named Elysia plugin of macros, built from narrow inputs — a key
 * verifier and an access-mode reader (src/http/api-key-guard.ts) and an authenticator
 * (src/http/user-guard.ts) — never the platform. A handler receives its caller one
 * way: as `apiKey` and/or `user` on its context.
 *
 * | macro                       | admits                                                | handler gets |
 * |-----------------------------|-------------------------------------------------------|--------------|
 * | `publicAccess: true`        | the access-mode gate of a public prefix               | `apiKey: ApiKeyPrincipal \| null` |
 * | `apiKey: true \| permission \| KeyNeed` | an active key (with the permission)       | `apiKey: ApiKeyPrincipal` |
 * | `user: true`                | a Bearer access token of a signed-in site user        | `user: RequestUser` |
 * | `userOrApiKey: permission`  | a user (when Authorization is sent) or a key with the permission | `user` or `apiKey` |
 *
 * Each check runs in `transform`, which Elysia runs before body validation: a caller
 * who may not ask gets 401/403, never an answer about a body it may not send
 * (docs/api-keys.md). `resolve` then hands the caller to the handler, typed. A whole
 * area takes one with `.guard({ apiKey: 'mail:send' })`: its check runs before the
 * routes' own `transform` hooks, which can read the caller (`KeyAdmitted`).
 *
 * @example
 * new Elysia({ prefix }).use(guards(inputs)).guard({ apiKey: 'mail:send' }).post('/send', ({ apiKey }) => …)
 * new Elysia({ prefix }).use(guards(inputs)).get('/me', ({ user }) => …, { user: true })
 */
import { Elysia } from 'elysia';
import { Errors } from './errors';
import {
  keyChecks,
  sendsApiKey,
  type ApiKeyPrincipal,
  type KeyGuardInputs,
  type KeyNeed,
  type Permission,
} from './api-key-guard';
import { requestUser, sendsAuthorization, type Authenticator, type RequestUser } from './user-guard';

export interface GuardInputs extends KeyGuardInputs {
  authenticate: Authenticator;
}

/** The callers a guard keeps on the context (in `transform`, before validation). */
export interface Admitted {
  apiKey?: ApiKeyPrincipal | null;
  user?: RequestUser;
}

/**
 * What a route's own `transform` sees behind `.guard({ apiKey })`, e.g.
 * `const { apiKey } = context as object as KeyAdmitted` (its handler gets `apiKey` typed).
 */
export interface KeyAdmitted {
  apiKey: ApiKeyPrincipal;
}

// Elysia reads each hook's source to decide what to parse for a route (query, cookies, …).
// So the hooks below are arrow functions (the form it reads reliably, minified too, as in
// the executable), and they read and write the context through its properties, never
// handing it to a function, which would make it parse everything.
export function guards(inputs: GuardInputs) {
  const keys = keyChecks(inputs);
  const { authenticate } = inputs;
  return new Elysia({ name: 'basalt.guards' }).macro({
    publicAccess: {
      transform: async (context) => {
        (context as Admitted).apiKey = await keys.publicAccess(context.request);
      },
      resolve: (context) => ({ apiKey: (context as Admitted).apiKey ?? null }),
    },
    apiKey: (need: true | Permission | KeyNeed) => {
      const check: KeyNeed = need === true ? {} : typeof need === 'string' ? { permission: need } : need;
      return {
        transform: async (context) => {
          (context as Admitted).apiKey = await keys.require(context.request, check);
        },
        resolve: (context) => ({ apiKey: (context as Admitted).apiKey as ApiKeyPrincipal }),
      };
    },
    user: {
      transform: async (context) => {
        (context as Admitted).user = await requestUser(authenticate, context.request);
      },
      resolve: (context) => ({ user: (context as Admitted).user as RequestUser }),
    },
    /**
     * A site user or a backend (docs/files.md): an Authorization header decides (a bad
     * token is 401 even when a key is sent too); otherwise X-API-Key with `permission`.
     */
    userOrApiKey: (permission: Permission) => {
      const family = permission.slice(0, permission.indexOf(':'));
      const missing = `Send a user's access token (Authorization: Bearer …) or an API key with the ${permission} or ${family}:* permission (X-API-Key).`;
      return {
        transform: async (context) => {
          const { request } = context;
          if (sendsAuthorization(request)) (context as Admitted).user = await requestUser(authenticate, request);
          else if (sendsApiKey(request)) (context as Admitted).apiKey = await keys.require(request, { permission });
          else throw Errors.unauthorized(missing);
        },
        resolve: (context) => ({ user: (context as Admitted).user, apiKey: (context as Admitted).apiKey ?? undefined }),
      };
    },
  });
}
