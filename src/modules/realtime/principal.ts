/**
 * Who a realtime stream belongs to, and the identity its rows are read as (docs/realtime.md,
 * "Visibility"): a service key reads as the platform (its whitelist), a site user as
 * `basalt_user` with their id, nobody as `basalt_anon`. Streams of one identity share
 * every row read, so the key of an identity is what the fan-out groups by.
 */
import type { ApiKeyPrincipal } from '../../http/api-key-guard';

export type Principal =
  | { kind: 'key'; key: Pick<ApiKeyPrincipal, 'id' | 'tables'> }
  | { kind: 'user'; userId: string; sessionId: string; email: string; tokenExpiresAt: number }
  | { kind: 'anon'; ip: string; withKey: boolean };

/** The identity rows are read as: every service key reads alike (whitelists are checked per stream). */
export type Identity = { kind: 'service' } | { kind: 'user'; userId: string; email: string } | { kind: 'anon' };

export function identityOf(p: Principal): Identity {
  if (p.kind === 'key') return { kind: 'service' };
  if (p.kind === 'user') return { kind: 'user', userId: p.userId, email: p.email };
  return { kind: 'anon' };
}

export function identityKey(i: Identity): string {
  return i.kind === 'user' ? `user:${i.userId}` : i.kind;
}

/** The database role an identity reads as (null: the platform's own role). */
export function roleOf(i: Identity): 'basalt_user' | 'basalt_anon' | null {
  return i.kind === 'user' ? 'basalt_user' : i.kind === 'anon' ? 'basalt_anon' : null;
}

/** What the per-principal connection limit counts by. */
export function limitKey(p: Principal): { key: string; setting: string } {
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
