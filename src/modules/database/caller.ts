/**
 * Who is calling the Database API (docs/database.md, "Who is which role"):
 *
 * | the request carries                                   | caller |
 * |-------------------------------------------------------|--------|
 * | `X-API-Key` with a service key                          | `key`: as before users' own data, an Authorization header is ignored |
 * | `Authorization: Bearer` (and no key, or a public key)   | `user`: the token must be an active user's (else 401 as on /api/v1/auth/me) |
 * | nothing (open mode) or only a public key               | `anon` |
 *
 * In `api_key_required` mode a request without a key is 401 `api_key_required` before
 * anything else, as on every public prefix; an unknown, revoked or expired key is 401.
 */
import type { ApiKeyPrincipal } from '../../http/api-key-guard';
import { keyChecks, sendsApiKey } from '../../http/api-key-guard';
import type { GuardInputs } from '../../http/guards';
import { bearerToken, requestUser, sendsAuthorization, type RequestUser } from '../../http/user-guard';
import { type Identity, userIdentity } from './identity';
import { BoundedMap } from '../../util/bounded-map';
import { Errors } from '../../http/errors';

export type DbCaller =
  | { kind: 'key'; key: ApiKeyPrincipal }
  | { kind: 'user'; user: RequestUser; identity: Identity }
  | { kind: 'anon'; key: ApiKeyPrincipal | null };

export interface CallerInputs extends GuardInputs {
  /** The user's public facts for `basalt.jwt()` beside the token's claims (email, email_verified). */
  profile: (user: RequestUser) => Promise<{ email: string; email_verified: boolean }>;
}

/** The owner of a Database API transaction: the key's id, or `user:<id>` for a user (ids are UUIDs, so the two never meet). */
export function ownerOf(caller: DbCaller & { kind: 'key' | 'user' }): string {
  return caller.kind === 'key' ? caller.key.id : `user:${caller.user.userId}`;
}

/** Whether an owner id (`ownerOf`) is a user's. */
export function isUserOwner(owner: string): boolean {
  return owner.startsWith('user:');
}

/** The session a user's transaction belongs to (none for a key's): only it may use the transaction. */
export function sessionOf(caller: DbCaller & { kind: 'key' | 'user' }): string | undefined {
  return caller.kind === 'user' ? caller.user.sessionId : undefined;
}

/** The verified token's claims (its payload; the signature was checked by the authenticator). */
function tokenClaims(token: string): Record<string, unknown> {
  const payload = token.split('.')[1] ?? '';
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/**
 * What `basalt.jwt()` returns for a user's request: the verified token's claims (sub, sid,
 * role, amr, aal…) with the user's current e-mail facts. Realtime's visibility checks use
 * the same (docs/realtime.md), so policies answer alike on both.
 */
export function userClaims(
  token: string,
  profile: { email: string; email_verified: boolean },
): Record<string, unknown> {
  return { ...tokenClaims(token), email: profile.email, email_verified: profile.email_verified };
}

/** Identities by access token, while the user's e-mail facts stay as they were (`identityOf`). */
const MAX_IDENTITIES = 1000;

export function callerChecks(inputs: CallerInputs) {
  const keys = keyChecks(inputs);
  /**
   * The identity of a verified token: its claims are a function of the token and the user's
   * e-mail facts, so a token's requests share one (decoded once; identity.ts makes its
   * statement values once). Checked again on every request: the token by `authenticate`
   * first, the facts here. At most MAX_IDENTITIES tokens are kept; beyond, the least recently used goes.
   */
  const identities = new BoundedMap<string, { email: string; verified: boolean; identity: Identity }>(MAX_IDENTITIES);
  const identityOf = (token: string, user: RequestUser, profile: { email: string; email_verified: boolean }) => {
    const known = identities.get(token);
    if (known && known.email === profile.email && known.verified === profile.email_verified) return known.identity;
    const identity = userIdentity(user.userId, userClaims(token, profile));
    identities.set(token, { email: profile.email, verified: profile.email_verified, identity });
    return identity;
  };
  return {
    /** The caller of `request`, or the 401 it gets. */
    async resolve(request: Request): Promise<DbCaller> {
      let key: ApiKeyPrincipal | null = null;
      if (sendsApiKey(request) || inputs.accessMode() === 'api_key_required') {
        key = await keys.require(request, { publicPrefix: true });
        if (key.type === 'service') return { kind: 'key', key };
      }
      if (!sendsAuthorization(request)) return { kind: 'anon', key };
      const token = bearerToken(request);
      const user = await requestUser(inputs.authenticate, request);
      const profile = await inputs.profile(user);
      return { kind: 'user', user, identity: identityOf(token!, user, profile) };
    },
    /**
     * The answer a user or anon caller got before users' own data (and anon still gets
     * where nothing is granted to basalt_anon): no key → 401, a public key lacks db:query → 403.
     */
    async refuseAsBefore(request: Request): Promise<never> {
      // Nothing sent at all, where the site does not ask every request for a key: most likely a
      // page that has not signed in yet, which "needs an API key" would send the wrong way.
      if (!sendsApiKey(request) && !sendsAuthorization(request) && inputs.accessMode() !== 'api_key_required')
        throw Errors.unauthorized(
          'No credentials: sign in and send the user\'s access token (Authorization: Bearer …), or a service key (X-API-Key). Without either, a request reaches only what is granted to basalt_anon (docs/database.md, "Who is which role").',
        );
      await keys.require(request, { publicPrefix: true, permission: 'db:query' });
      throw new Error('unreachable: only a service key holds db:query');
    },
  };
}
