/**
 * The connections Database API statements run on.
 *
 * Embedded: the platform's own database (one in-process session; PGlite cannot
 * interrupt a running statement, so db.statement_timeout_ms does not apply there).
 *
 * External: two pools of its own, one for service keys (logged in as the platform's role)
 * and one for users and anon (logged in as the authenticator: authenticator.ts), each
 * (size database.pool_max) with connections that start with
 * `statement_timeout` = db.statement_timeout_ms and `lock_timeout` = half of it. Setting the timeout when the
 * connection starts costs nothing per query, where `SET LOCAL` would need a
 * transaction (three more round trips) around every statement; behind a transaction-mode
 * pooler, which takes no such start-up parameter, they are set in every transaction instead, in
 * the same round trip (`localSettings`, src/db/external.ts). The pool also keeps
 * statements prepared per connection: API statement texts repeat (same entity,
 * fields and filter shape), so most queries are one round trip. A user's or anon's request
 * (`Db.atOnce`) goes out as one batch with a single Sync, and a service key's statement outside
 * a transaction as a batch of one (service.ts, `alone`), on connections of the pool's own
 * (src/db/external-wire.ts), opened with the same settings; a transaction's statements stay on
 * its reserved driver connection. A separate pool also
 * keeps API load from starving platform work (sessions, mail queue) of connections.
 * When the timeout setting changes, a new pool replaces the old one; the old one is
 * closed once the transactions that may still use it have had time to end.
 *
 * Waiting for a connection of the pool is bounded (database.busy_timeout_ms) and fair
 * between keys: one key holds at most db.pool_share_per_key percent of it
 * (src/db/wait-gate.ts, docs/database.md "Waiting for the database").
 */
import type { Db, WaitStats } from '../../db/engine';
import type { Platform } from '../../platform';
import { lockTimeoutMs } from './pg-errors';

export interface ApiPool {
  /** The pool service keys' statements run on (logged in as the platform's role). */
  get: () => Promise<Db>;
  /**
   * The pool users' and anon statements run on: on external PostgreSQL logged in as the
   * authenticator (authenticator.ts), never as the platform's role; embedded, the one session.
   */
  identities: () => Promise<Db>;
  /** Refuse the queued waits of a revoked key, in every pool still open. */
  cancelWaits: (key: string, err: unknown) => void;
  /** Wait counters of the pools' own connections (external only: embedded, the platform's). */
  stats: () => WaitStats | undefined;
  close: () => Promise<void>;
}

/**
 * `userUrl`: where the identities' pool connects (the authenticator's URL); until it is
 * known (start-up provisions it), `identities` refuses.
 */
export function openApiPool(p: Platform, userUrl: () => string | undefined): ApiPool {
  if (p.db.kind === 'embedded')
    return {
      get: async () => p.db,
      identities: async () => p.db,
      cancelWaits: (key, err) => p.db.cancelWaits(key, err),
      stats: () => undefined,
      close: async () => {},
    };
  const keys = poolSlot(p, () => p.settings.get('database.url'), 'basalt-db-api');
  const users = poolSlot(
    p,
    () => {
      const url = userUrl();
      if (!url) throw new Error("users' own data is off: no authenticator connection");
      return url;
    },
    'basalt-db-user',
  );
  const slots = [keys, users];
  return {
    get: keys.get,
    identities: users.get,
    cancelWaits: (key, err) => {
      for (const s of slots) for (const db of s.opened) db.cancelWaits(key, err);
    },
    stats: () => {
      const sum: WaitStats = { waited: 0, refused: 0, abandoned: 0, preempted: 0 };
      for (const s of slots) s.addStats(sum);
      return sum;
    },
    close: async () => {
      await Promise.all(slots.map((s) => s.close()));
    },
  };
}

function add(to: WaitStats, from: WaitStats): void {
  for (const k of Object.keys(to) as (keyof WaitStats)[]) to[k] += from[k];
}

/** One pool of `url`, opened on first use and replaced when db.statement_timeout_ms changes. */
function poolSlot(p: Platform, url: () => string, applicationName: string) {
  const opened = new Set<Db>();
  /** Counters of pools already closed, so /metrics counters never go back. */
  const before: WaitStats = { waited: 0, refused: 0, abandoned: 0, preempted: 0 };
  let current: Promise<Db> | undefined;
  let currentTimeout = 0;
  const retired = new Set<Promise<Db>>();
  const timers = new Set<ReturnType<typeof setTimeout>>();

  const open = async (timeoutMs: number): Promise<Db> => {
    const { openExternal } = await import('../../db/external');
    return openExternal(url(), {
      max: p.settings.get('database.pool_max'),
      connection: {
        statement_timeout: String(timeoutMs),
        lock_timeout: String(lockTimeoutMs(timeoutMs)),
        application_name: applicationName,
      },
      prepare: true,
      pooler: p.settings.get('database.pooler'),
      busyTimeoutMs: () => p.settings.get('database.busy_timeout_ms'),
      keyShare: () => p.settings.get('db.pool_share_per_key') / 100,
    }).then((db) => {
      opened.add(db);
      return db;
    });
  };

  const get = (): Promise<Db> => {
    const timeoutMs = p.settings.get('db.statement_timeout_ms');
    if (current && timeoutMs === currentTimeout) return current;
    const old = current;
    currentTimeout = timeoutMs;
    current = open(timeoutMs);
    // A failed open is retried by the next request.
    current.catch(() => {
      if (currentTimeout === timeoutMs) {
        current = undefined;
        currentTimeout = 0;
      }
    });
    if (old) {
      retired.add(old);
      const grace = p.settings.get('db.transaction_idle_timeout_ms') + timeoutMs + 1000;
      const t = setTimeout(() => {
        timers.delete(t);
        retired.delete(old);
        void old
          .then((db) => {
            opened.delete(db);
            add(before, db.waits);
            return db.close();
          })
          .catch((e) => p.log.warn('closing a retired Database API pool failed', { cause: e }));
      }, grace);
      (t as { unref?: () => void }).unref?.();
      timers.add(t);
    }
    return current;
  };

  return {
    get,
    opened,
    addStats: (sum: WaitStats) => {
      add(sum, before);
      for (const db of opened) add(sum, db.waits);
    },
    close: async () => {
      for (const t of timers) clearTimeout(t);
      const all = [...retired, ...(current ? [current] : [])];
      current = undefined;
      // At shutdown: a pool that never opened, or fails to close, holds nothing to keep.
      await Promise.all(all.map((d) => d.then((db) => db.close()).catch(() => {})));
    },
  };
}
