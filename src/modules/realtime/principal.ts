/**
 * Who a realtime stream belongs to, and the identity its rows are read as (docs/realtime.md,
 * "Visibility"): a service key reads as the platform (its whitelist), a site user as
 * `basalt_user` with their id, nobody as `basalt_anon`. Streams of one identity share
 * every row read, so the key of an identity is what the fan-out groups by.
 */
import type { ApiKeyPrincipal } from '../../http/api-key-guard';

export type Principal =
  | { kind: 'key'; key: Pick<ApiKeyPrincipal, 'id' | 'tables'> }
  | {
      kind: 'user';
      userId: string;
      sessionId: string;
      /** What `basalt.jwt()` returns for this stream: as on the Database API (database/caller.ts, `userClaims`). */
      claims: Record<string, unknown>;
      tokenExpiresAt: number;
    }
  | { kind: 'anon'; ip: string; withKey: boolean };

/** The identity rows are read as: every service key reads alike (whitelists are checked per stream). */
export type Identity =
  | { kind: 'service' }
  | { kind: 'user'; userId: string; claims: Record<string, unknown> }
  | { kind: 'anon' };

/**
 * Claims that differ between the access tokens of one session (each refresh issues new
 * ones): left out of `basalt.jwt()` in realtime, so a user's streams of one session share
 * one evaluation whichever token opened each. The stream ends at its token's `exp` anyway.
 */
const PER_TOKEN = new Set(['iat', 'exp', 'nbf', 'jti']);

export function identityOf(p: Principal): Identity {
  if (p.kind === 'key') return { kind: 'service' };
  if (p.kind === 'user') {
    const claims: Record<string, unknown> = {};
    for (const k of Object.keys(p.claims).sort()) if (!PER_TOKEN.has(k)) claims[k] = p.claims[k];
    return { kind: 'user', userId: p.userId, claims };
  }
  return { kind: 'anon' };
}

/**
 * What the fan-out groups streams by: streams whose rows are evaluated alike. A user's
 * streams group by user and claims (sid, amr, aal… may differ between their sessions,
 * and a policy may read them).
 */
export function identityKey(i: Identity): string {
  return i.kind === 'user' ? `user:${i.userId}:${JSON.stringify(i.claims)}` : i.kind;
}

/** The database role an identity reads as (null: the platform's own role). */
export function roleOf(i: Identity): 'basalt_user' | 'basalt_anon' | null {
  return i.kind === 'user' ? 'basalt_user' : i.kind === 'anon' ? 'basalt_anon' : null;
}

/** What the per-principal connection limit counts by. */
export function limitKey(p: Principal): { key: string; setting: `realtime.max_connections_per_${'key' | 'user'}` } {
  if (p.kind === 'key') return { key: `key:${p.key.id}`, setting: 'realtime.max_connections_per_key' };
  if (p.kind === 'user') return { key: `user:${p.userId}`, setting: 'realtime.max_connections_per_user' };
  return { key: `anon:${p.ip}`, setting: 'realtime.max_connections_per_user' };
}

/** The `exp` of an access token already verified by Public Auth, in ms. */
export function tokenExpiry(token: string): number {
  const part = token.split('.')[1] ?? '';
  const claims = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as { exp?: number };
  return (claims.exp ?? 0) * 1000;
}
