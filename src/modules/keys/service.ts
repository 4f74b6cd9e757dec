/**
 * API keys (docs/api-keys.md): creation with validation, listing without secrets,
 * revocation that takes effect on every instance at once, and verification of a
 * presented key with a short-lived cache.
 */
import type { Platform } from '../../platform';
import { ANY_CHANGE, type Queryable } from '../../db/engine';
import { KeyErrors } from './errors';
import { generateKey, hashKey, keyShape, sameHash } from './key-material';
import { validateKeyInput, type CreateKeyInput, type KeyInfo, type KeyType } from './model';
import { VerifiedCache, type CachedPrincipal } from './verified-cache';
import { isUuid } from '../../util/uuid';

/** Who a verified key is. Arrays are frozen: principals are shared by the cache. */
export interface KeyPrincipal {
  id: string;
  type: KeyType;
  service: string | null;
  permissions: string[];
  tables: string[];
}

export interface KeyServiceOptions {
  /** How long a verification is reused without asking the database. */
  cacheTtlMs?: number;
  /** last_used_at is written at most this often per key. */
  touchIntervalMs?: number;
}

/** NOTIFY channel: payload `revoke:<id>` or `create:<id>`. */
export const KEYS_CHANNEL = 'basalt_api_keys';
const SITE_SETTING = 'web.site_public_key';

/** A row of basalt.api_keys: what lists show, less what is derived from it, plus the hash. */
interface KeyRow extends Omit<KeyInfo, 'display' | 'status' | 'site'> {
  key_hash: string;
}

const COLUMNS =
  'id, type, name, service, permissions, tables, key_hash, prefix, last4, created_at, expires_at, revoked_at, last_used_at';

export class KeyService {
  private cache: VerifiedCache;
  private touchIntervalMs: number;
  private lastTouch = new Map<string, number>();
  private pendingTouches = new Set<Promise<void>>();
  private inflight = new Map<string, Promise<CachedPrincipal | null>>();
  private listening?: Promise<void>;
  /** `listening` has resolved: the hot path skips awaiting it (one turn per request). */
  private subscribed = false;
  private unlisten?: () => Promise<void>;
  private revokeListeners = new Set<(id: string) => unknown>();

  constructor(
    private p: Platform,
    opts: KeyServiceOptions = {},
  ) {
    this.cache = new VerifiedCache(opts.cacheTtlMs ?? 30_000);
    this.touchIntervalMs = opts.touchIntervalMs ?? 60_000;
    p.onShutdown(() => this.close());
  }

  /**
   * Create a key. The raw key is in the result and nowhere else: only its SHA-256
   * hash is stored. Throws a 400 `validation_error` (`KeyErrors.invalid`) naming the field that is wrong.
   */
  async create(input: CreateKeyInput, tx?: Queryable): Promise<KeyInfo & { key: string }> {
    const spec = validateKeyInput(input);
    const material = generateKey(spec.type);
    const { rows } = await (tx ?? this.p.db).query<KeyRow>(
      `INSERT INTO basalt.api_keys (type, name, service, permissions, tables, key_hash, prefix, last4, expires_at)
       VALUES ($1, $2, $3, $4::text[], $5::text[], $6, $7, $8, $9) RETURNING ${COLUMNS}`,
      [
        spec.type,
        spec.name,
        spec.service,
        spec.permissions,
        spec.tables,
        material.hash,
        material.prefix,
        material.last4,
        spec.expiresAt,
      ],
    );
    if (spec.site && tx) {
      await this.p.settings.set(SITE_SETTING, material.key, tx); // a failure rolls the key back with the transaction
    } else if (spec.site) {
      try {
        await this.p.settings.set(SITE_SETTING, material.key);
      } catch (e) {
        // The caller never sees this key: remove it rather than leave an orphan nobody can use.
        await this.p.db
          .query('DELETE FROM basalt.api_keys WHERE id = $1', [rows[0]!.id])
          .catch((e) => this.p.log.warn('could not remove a key nobody received', { key_id: rows[0]!.id, cause: e }));
        throw e;
      }
    }
    await this.announce(`create:${rows[0]!.id}`, tx);
    return { ...this.info(rows[0]!, spec.site ? material.hash : null), key: material.key };
  }

  /** Every key, newest first, with prefix and last four characters; never the key or its hash. */
  /** Keys neither revoked nor expired (the dashboard's count). */
  async countActive(): Promise<number> {
    const { rows } = await this.p.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM basalt.api_keys WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())',
    );
    return rows[0]!.n;
  }

  async list(): Promise<KeyInfo[]> {
    const { rows } = await this.p.db.query<KeyRow>(
      `SELECT ${COLUMNS} FROM basalt.api_keys ORDER BY created_at DESC, id`,
    );
    const site = this.siteHash();
    return rows.map((r) => this.info(r, site));
  }

  /** One key by id, or null. */
  async get(id: string): Promise<KeyInfo | null> {
    if (!isUuid(id)) return null;
    const { rows } = await this.p.db.query<KeyRow>(`SELECT ${COLUMNS} FROM basalt.api_keys WHERE id = $1`, [id]);
    return rows[0] ? this.info(rows[0], this.siteHash()) : null;
  }

  /**
   * Revoke a key: it stops working at once here and, through NOTIFY, on every other
   * instance. Revoking a revoked key is a no-op. Unknown id → 404 `key_not_found`.
   */
  async revoke(id: string, tx?: Queryable): Promise<KeyInfo> {
    if (!isUuid(id)) throw KeyErrors.notFound(id);
    // The key's open Database API transactions end first: on the embedded engine an open
    // transaction holds the database, so the UPDATE below would wait for it otherwise.
    await this.revoked(id);
    const { rows } = await (tx ?? this.p.db).query<KeyRow>(
      `UPDATE basalt.api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING ${COLUMNS}`,
      [id],
    );
    if (!rows[0]) throw KeyErrors.notFound(id);
    this.cache.evictId(id);
    await this.announce(`revoke:${id}`, tx);
    // Again, for one begun while the UPDATE ran; with `tx` the NOTIFY does it at commit.
    if (!tx) await this.revoked(id);
    return this.info(rows[0], this.siteHash());
  }

  /**
   * Call `fn` with the id of every key revoked: here, at once, and on every other
   * instance sharing the database, when the NOTIFY arrives (docs/api-keys.md). The
   * Database API rolls back the key's open transactions with it. A promise `fn` returns
   * is awaited. Returns a remover.
   */
  onRevoke(fn: (id: string) => unknown): () => void {
    this.revokeListeners.add(fn);
    return () => this.revokeListeners.delete(fn);
  }

  /**
   * Run the revocation listeners for `id` on this instance now (revoke() does it too).
   * A caller that revokes inside its own transaction on the embedded engine calls this
   * before opening it, since an open API transaction of the key would hold the database.
   */
  async revoked(id: string): Promise<void> {
    await Promise.all(
      [...this.revokeListeners].map(async (fn) => {
        try {
          await fn(id);
        } catch (e) {
          this.p.log.warn('a revocation listener failed', { key_id: id, cause: e });
        }
      }),
    );
  }

  /**
   * The principal of an active key, or null for a malformed, unknown, revoked or
   * expired one. Database errors propagate (→ 503). `recordUse: false` checks a key
   * without counting it as used (the platform inspecting its own site key).
   */
  async verify(rawKey: string | null | undefined, opts: { recordUse?: boolean } = {}): Promise<KeyPrincipal | null> {
    if (typeof rawKey !== 'string') return null;
    const claimed = keyShape(rawKey);
    if (!claimed) return null;
    if (!this.subscribed) await this.listen();
    const hash = hashKey(rawKey);
    const now = Date.now();
    let entry = this.cache.get(hash, now);
    if (entry === undefined) entry = await this.lookup(hash, claimed);
    if (!entry || (entry.expiresAt !== null && entry.expiresAt <= now)) return null;
    if (opts.recordUse !== false) this.touch(entry.id, now);
    return entry;
  }

  /** The designated site public key, if it is an active public key (never a service key). */
  async sitePublicKey(): Promise<string | null> {
    const raw = this.p.settings.get(SITE_SETTING);
    if (!raw) return null;
    const principal = await this.verify(raw, { recordUse: false });
    return principal?.type === 'public' ? raw : null;
  }

  /** Wait for pending last_used_at writes and stop listening (shutdown, tests). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.pendingTouches]);
    const stop = this.unlisten;
    this.unlisten = undefined;
    await stop?.().catch(() => {}); // stopping: the connection that listened is closing anyway
  }

  /**
   * One database lookup per hash at a time (a burst of requests with a new key shares
   * it), cached unless an invalidation arrived while it ran that could make its answer stale.
   */
  private lookup(hash: string, claimed: KeyType): Promise<CachedPrincipal | null> {
    let pending = this.inflight.get(hash);
    if (!pending) {
      const generation = this.cache.generation();
      pending = this.load(hash, claimed)
        .then((entry) => {
          this.cache.setIfCurrent(hash, entry, generation);
          return entry;
        })
        .finally(() => this.inflight.delete(hash));
      this.inflight.set(hash, pending);
    }
    return pending;
  }

  private async load(hash: string, claimed: KeyType): Promise<CachedPrincipal | null> {
    const { rows } = await this.p.db.query<KeyRow>(
      `SELECT ${COLUMNS} FROM basalt.api_keys WHERE key_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`,
      [hash],
    );
    const r = rows[0];
    // The index lookup found the row; the constant-time comparison keeps the final check free of timing signal.
    if (!r || !sameHash(r.key_hash, hash) || r.type !== claimed) return null;
    return Object.freeze({
      id: r.id,
      type: r.type,
      service: r.service,
      permissions: Object.freeze([...r.permissions]) as string[],
      tables: Object.freeze([...r.tables]) as string[],
      expiresAt: r.expires_at ? r.expires_at.getTime() : null,
    });
  }

  /** Record use at most once per interval per key, off the request path. */
  private touch(id: string, now: number): void {
    const last = this.lastTouch.get(id);
    if (last !== undefined && now - last < this.touchIntervalMs) return;
    this.lastTouch.set(id, now);
    if (this.lastTouch.size > 50_000) this.lastTouch.clear(); // bound memory; worst case one extra write per key
    const write = this.p.db
      .query('UPDATE basalt.api_keys SET last_used_at = now() WHERE id = $1', [id])
      .then(() => undefined)
      .catch((e) => this.p.log.warn('could not record API key use', { key_id: id, cause: e }));
    this.pendingTouches.add(write);
    void write.finally(() => this.pendingTouches.delete(write));
  }

  /** Subscribe once, before anything is cached, so no invalidation can be missed. */
  private listen(): Promise<void> {
    return (this.listening ??= this.p.db
      .listen(KEYS_CHANNEL, (payload) => {
        // Polled instead of notified (a transaction-mode pooler without database.direct_url): any entry may be stale.
        if (payload === ANY_CHANGE) return this.cache.clear();
        const [kind, id] = payload.split(':');
        if (kind === 'revoke' && id) {
          this.cache.evictId(id);
          void this.revoked(id);
        } else if (kind === 'create') this.cache.evictNegative();
      })
      .then((stop) => {
        this.unlisten = stop;
        this.subscribed = true;
      })
      .catch((e) => {
        this.listening = undefined; // try again on the next verification
        throw e;
      }));
  }

  /** With `tx`, pg_notify joins the caller's transaction: delivered at commit, never on rollback. */
  private async announce(payload: string, tx?: Queryable): Promise<void> {
    if (tx) {
      await tx.query('SELECT pg_notify($1, $2)', [KEYS_CHANNEL, payload]);
      return;
    }
    try {
      await this.p.db.notify(KEYS_CHANNEL, payload);
    } catch (e) {
      // The change is committed; other instances catch up when their cache entry expires.
      this.p.log.warn('could not notify other instances of an API key change', { cause: e });
    }
  }

  private siteHash(): string | null {
    const raw = this.p.settings.get(SITE_SETTING);
    return raw ? hashKey(raw) : null;
  }

  private info(r: KeyRow, siteHash: string | null): KeyInfo {
    const now = Date.now();
    const status = r.revoked_at ? 'revoked' : r.expires_at && r.expires_at.getTime() <= now ? 'expired' : 'active';
    return {
      id: r.id,
      type: r.type,
      name: r.name,
      service: r.service,
      permissions: r.permissions,
      tables: r.tables,
      prefix: r.prefix,
      last4: r.last4,
      display: `${r.prefix}…${r.last4}`,
      status,
      site: r.type === 'public' && siteHash !== null && sameHash(r.key_hash, siteHash),
      created_at: r.created_at,
      expires_at: r.expires_at,
      revoked_at: r.revoked_at,
      last_used_at: r.last_used_at,
    };
  }
}

export function createKeyService(p: Platform, opts?: KeyServiceOptions): KeyService {
  return new KeyService(p, opts);
}
