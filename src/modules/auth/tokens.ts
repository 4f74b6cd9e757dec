/**
 * Opaque tokens (refresh, password reset, e-mail verification): `<id>.<secret>`.
 * The id finds the row; only SHA-256(secret) is stored and it is compared in
 * constant time, so a database leak yields no usable token and a lookup leaks
 * nothing through timing.
 */
import { timingSafeEqual } from 'node:crypto';

/** Lifetime of a refresh token; each rotation (./sessions.ts) gives the session as long again. */
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
