/**
 * Opaque tokens (refresh, password reset, e-mail verification): `<id>.<secret>`.
 * The id finds the row; only SHA-256(secret) is stored and it is compared in
 * constant time, so a database leak yields no usable token and a lookup leaks
 * nothing through timing.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Default lifetime of a refresh token (setting auth.refresh_token_seconds); each rotation (./sessions.ts) gives the session as long again. */
export const REFRESH_TOKEN_SECONDS = 30 * 86_400;

export interface OpaqueToken {
  /** What the client receives. */
  token: string;
  id: string;
  hash: Uint8Array;
}

const randomPart = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('base64url');

export function sha256(text: string): Uint8Array {
  return new Bun.CryptoHasher('sha256').update(text).digest() as Uint8Array;
}

/** A new token: 96-bit id, 256-bit secret. */
export function newOpaqueToken(): OpaqueToken {
  const id = randomPart(12);
  const secret = randomPart(32);
  return { token: `${id}.${secret}`, id, hash: sha256(secret) };
}

/**
 * A token derived from `seed` under `key` (an installation secret): the same seed always
 * gives the same token, and nobody without the key can compute it. The successor of a
 * refresh token is derived from that token's id and secret (./sessions.ts), so a client
 * that presents the token again within the reuse interval receives the very same
 * successor, though only its hash is stored.
 */
export function derivedOpaqueToken(key: Uint8Array, seed: string): OpaqueToken {
  const mac = (label: string) => createHmac('sha256', key).update(`${label}\0${seed}`).digest();
  const id = mac('id').subarray(0, 12).toString('base64url');
  const secret = mac('secret').toString('base64url');
  return { token: `${id}.${secret}`, id, hash: sha256(secret) };
}

/** Split a presented token; undefined when it cannot be one of ours. */
export function parseOpaqueToken(token: string): { id: string; secret: string } | undefined {
  const m = /^([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{43})$/.exec(token);
  return m ? { id: m[1]!, secret: m[2]! } : undefined;
}

/** Constant-time check of a presented secret against the stored hash. */
export function secretMatches(secret: string, stored: Uint8Array): boolean {
  const h = sha256(secret);
  return stored.length === h.length && timingSafeEqual(h, stored);
}
