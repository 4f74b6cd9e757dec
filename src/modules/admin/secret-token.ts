/**
 * The 32-byte random tokens of admin sessions and the setup link: base64url (43
 * characters) to the client, SHA-256 at rest. Lookups go by the hash (an index), which
 * reveals nothing usable through timing: finding a row needs the whole preimage.
 */
import { timingSafeEqual } from 'node:crypto';
import { sha256 } from '../auth/tokens';

const SHAPE = /^[A-Za-z0-9_-]{43}$/;

export function newSecretToken(): { token: string; hash: Uint8Array } {
  const token = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url');
  return { token, hash: sha256(token) };
}

/** The stored hash of a presented token, or undefined when it cannot be one of ours (no database work). */
export function hashOfPresented(token: string | null | undefined): Uint8Array | undefined {
  return typeof token === 'string' && SHAPE.test(token) ? sha256(token) : undefined;
}

/** Constant-time string equality (different lengths are simply unequal). */
export function sameString(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
