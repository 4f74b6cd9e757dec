/**
 * A Map that holds at most `max` entries: past it, the least recently used goes first
 * (`get` and `set` count as a use; `peek` and iteration do not). `onEvict` hears of each
 * entry pushed out that way (not of `delete` or `clear`). The one bounded cache the
 * platform's in-process caches share: verified API keys and access tokens, users'
 * identities, the prepared statements of the embedded engine and of external batches.
 */
export class BoundedMap<K, V> {
  // A Map iterates in insertion order: moving an entry to the end on use makes the first the least recently used.
  private readonly map = new Map<K, V>();

  constructor(
    readonly max: number,
    private readonly onEvict?: (key: K, value: V) => void,
  ) {}

  get(key: K): V | undefined {
    if (!this.map.has(key)) return undefined;
    const value = this.map.get(key) as V;
    this.map.delete(key);
    this.map.set(key, value);
    return value;
  }

  /** The value without counting it as a use. */
  peek(key: K): V | undefined {
    return this.map.get(key);
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  set(key: K, value: V): this {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.max) {
      const [oldest, old] = this.map.entries().next().value as [K, V];
      this.map.delete(oldest);
      this.onEvict?.(oldest, old);
    }
    return this;
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }

  get size(): number {
    return this.map.size;
  }

  /** Least recently used first; deleting while iterating is safe. */
  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.map.entries();
  }
}
