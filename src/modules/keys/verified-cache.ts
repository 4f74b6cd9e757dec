/**
 * Recently verified keys, so a busy integration does not cost a database round trip
 * per request. Entries live `ttlMs` at most; revocation anywhere evicts them at once
 * through NOTIFY (see service.ts), the TTL only bounds a lost notification.
 *
 * Keyed by the key's SHA-256 hash, never by the key. Negative entries (unknown,
 * revoked, expired) are cached too, so a client retrying with a dead key does not
 * reach the database each time; creating a key evicts them.
 */
import { BoundedMap } from '../../util/bounded-map';

export interface CachedPrincipal {
  id: string;
  type: 'public' | 'service';
  service: string | null;
  permissions: string[];
  tables: string[];
  expiresAt: number | null;
}

interface Entry {
  value: CachedPrincipal | null;
  until: number;
}

export class VerifiedCache {
  private readonly map: BoundedMap<string, Entry>;
  /**
   * Invalidation counters. A lookup that overlapped an invalidation must not cache its
   * possibly stale answer: a positive one after a revocation (`revocations`), a
   * negative one after a creation (`creations`). See `generation()` / `setIfCurrent()`.
   */
  private revocations = 0;
  private creations = 0;

  constructor(
    private ttlMs: number,
    max = 10_000,
  ) {
    this.map = new BoundedMap(max);
  }

  /** undefined: not cached; null: known invalid. */
  get(hash: string, now = Date.now()): CachedPrincipal | null | undefined {
    const e = this.map.get(hash);
    if (!e) return undefined;
    if (e.until <= now) {
      this.map.delete(hash);
      return undefined;
    }
    return e.value;
  }

  set(hash: string, value: CachedPrincipal | null, now = Date.now()): void {
    this.map.set(hash, { value, until: now + this.ttlMs });
  }

  /** Snapshot taken before a lookup starts. */
  generation(): { revocations: number; creations: number } {
    return { revocations: this.revocations, creations: this.creations };
  }

  /** Cache a lookup's answer unless an invalidation that could make it stale happened since `gen`. */
  setIfCurrent(hash: string, value: CachedPrincipal | null, gen: { revocations: number; creations: number }): void {
    const stale = value ? this.revocations !== gen.revocations : this.creations !== gen.creations;
    if (!stale) this.set(hash, value);
  }

  /** Evict the entries of one key (revoked or changed). */
  evictId(id: string): void {
    this.revocations++;
    for (const [h, e] of this.map) if (e.value?.id === id) this.map.delete(h);
  }

  /** Evict negative entries (a key was created: a hash once unknown may now be valid). */
  evictNegative(): void {
    this.creations++;
    for (const [h, e] of this.map) if (!e.value) this.map.delete(h);
  }

  clear(): void {
    this.revocations++;
    this.creations++;
    this.map.clear();
  }

  get size(): number {
    return this.map.size;
  }
}
