/**
 * The key string itself: `pk_`/`sk_` + 32 random bytes in base64url (43 characters,
 * 256 bits). Keys are high-entropy, so a fast SHA-256 is the right hash: a slow
 * password hash would add latency to every request and no security.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { KeyType } from './model';

const BODY_CHARS = 43;
const SHAPE = /^(pk|sk)_[A-Za-z0-9_-]{43}$/;
/** Random characters kept in `prefix` (36 of 256 bits), enough to tell keys apart in a list. */
const PREFIX_CHARS = 6;

export function typePrefix(type: KeyType): 'pk_' | 'sk_' {
  return type === 'public' ? 'pk_' : 'sk_';
}

export function generateKey(type: KeyType): { key: string; hash: string; prefix: string; last4: string } {
  const body = randomBytes(32).toString('base64url');
  const key = typePrefix(type) + body;
  return { key, hash: hashKey(key), prefix: key.slice(0, 3 + PREFIX_CHARS), last4: key.slice(-4) };
}

/** SHA-256 of the whole key, lowercase hex (Bun's one-shot hash: a third of node:crypto's createHash per request). */
export function hashKey(key: string): string {
  return Bun.SHA256.hash(key, 'hex');
}

/** Cheap shape check before any hashing or database work; also tells the type a key claims. */
export function keyShape(key: string): KeyType | null {
  if (key.length !== 3 + BODY_CHARS || !SHAPE.test(key)) return null;
  return key.startsWith('pk_') ? 'public' : 'service';
}

/** Constant-time equality of two hex hashes of equal length. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}
