/**
 * Group commit for the embedded engine (`database.embedded_sync = full`; docs/operations.md,
 * "Durability"; docs/architecture.md, "Group commit").
 *
 * PostgreSQL flushes the WAL at each commit with `fsync` on the segment (the engine runs with
 * `wal_sync_method=fsync`). Done there, in line, that `fsync` blocks the event loop, and every
 * commit pays one. Instead, the file-system layer (src/db/embedded-fs.ts) answers PostgreSQL's
 * `fsync` of a WAL segment at once, the WAL already written to the OS, and notes it here
 * (`defer`): the commit returns from the engine. Whoever acknowledges the commit then waits
 * (`durable`) for the next shared sync: `fdatasync` of every segment written since the last one,
 * on a descriptor of our own, in the thread pool, so the event loop goes on and the commits made
 * while a sync runs are all covered by the next (at most IN_FLIGHT run at once). Nothing is
 * acknowledged before a sync that began after its WAL was written has finished.
 *
 * PostgreSQL now counts that WAL as flushed while it may not be on disk yet, and it relies on
 * the order: a data page reaches its file only after the WAL up to the page's LSN is flushed,
 * and `pg_control` or a folder is synced after the WAL it refers to. So before any write to a
 * file outside `pg_wal/` and before any other `fsync`, the WAL noted here is synced in line
 * (`syncNow`): PostgreSQL's order of writes on disk is kept, at the price of an in-line sync
 * when a data page is written while commits wait (a buffer evicted, a checkpoint). A page of
 * zeros (a relation extended) depends on no WAL and is written at once.
 *
 * A failed sync is final (as PostgreSQL's `data_sync_retry = off`): the commits waiting are
 * refused, every later wait and sync fails, and `onFailure` stops the engine.
 */
import { closeSync, fdatasync, fdatasyncSync, openSync } from 'node:fs';

/**
 * Syncs in flight at once. A commit waits for a sync that starts after it: with one at a time,
 * for the running one to end and then for the next (1.5 syncs on average); with two, a new one
 * starts while the other runs, so a commit waits less and the clients answered by one sync keep
 * the engine busy while the next runs. A sync that ends covers everything written before it
 * began, so they may end in any order.
 */
const IN_FLIGHT = 2;

interface Waiter {
  upTo: number;
  resolve: () => void;
  reject: (e: Error) => void;
}

/** How the WAL was synced since the engine opened. */
export interface WalSyncStats {
  /** WAL flushes PostgreSQL asked for (commits, mostly), answered at once. */
  asked: number;
  /** Shared syncs run in the thread pool for waiting acknowledgements. */
  grouped: number;
  /** Syncs run in line, to keep PostgreSQL's order (a data file written or another file synced). */
  inline: number;
}

export class WalSyncs {
  private asked = 0;
  /** Flushes asked for up to this count are on disk. */
  private synced = 0;
  /** Our own descriptor of each WAL segment noted and not yet let go of, by path. */
  private readonly files = new Map<string, number>();
  /** Segments written since their last sync started. */
  private readonly dirty = new Set<string>();
  /** Segments of the syncs running in the thread pool (each path as often as syncs run on it). */
  private readonly inflight: string[] = [];
  /** Syncs running in the thread pool. */
  private running = 0;
  /** Flushes asked for up to this count are covered by a sync started (running or done). */
  private started = 0;
  private latest = '';
  private readonly waiters: Waiter[] = [];
  private failure: Error | undefined;
  private closed = false;
  readonly stats: WalSyncStats = { asked: 0, grouped: 0, inline: 0 };

  constructor(private readonly onFailure: (e: Error) => void) {}

  /** A count that moves when PostgreSQL asks for a WAL flush: read before and after work to know whether it wrote any. */
  get mark(): number {
    return this.asked;
  }

  /** WAL noted and not yet on disk. */
  get pending(): boolean {
    return this.asked > this.synced;
  }

  /** The sync that failed, once one has. */
  get failed(): Error | undefined {
    return this.failure;
  }

  /** PostgreSQL asked for the segment at `path` to be synced; its WAL is written to the OS. Throws when it cannot be opened. */
  defer(path: string): void {
    if (this.failure) throw this.failure;
    if (!this.files.has(path)) this.files.set(path, openSync(path, 'r+'));
    this.dirty.add(path);
    this.latest = path;
    this.asked++;
    this.stats.asked++;
  }

  /**
   * Every WAL flush noted so far, synced now, in line (blocking): before something PostgreSQL
   * orders after the WAL. Throws (and fails for good) when a sync fails.
   */
  syncNow(): void {
    if (this.failure) throw this.failure;
    if (!this.pending) return;
    const upTo = this.asked;
    try {
      for (const path of new Set([...this.inflight, ...this.dirty])) fdatasyncSync(this.files.get(path)!);
    } catch (e) {
      this.fail(e);
      throw e; // as it came, so PostgreSQL hears its errno
    }
    this.dirty.clear();
    this.stats.inline++;
    if (upTo > this.started) this.started = upTo;
    this.settle(upTo);
  }

  /**
   * Resolves once the WAL flushes asked for up to `upTo` (a `mark`) are on disk; starts a
   * sync when none runs. Rejects when a sync failed.
   */
  durable(upTo: number): Promise<void> {
    if (upTo <= this.synced) return Promise.resolve();
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ upTo, resolve, reject });
      this.start();
    });
  }

  /** Sync what is left in line and let go of the descriptors (the engine has closed), once no sync runs on them. */
  close(): void {
    if (!this.failure) this.syncNow();
    this.closed = true;
    if (this.running === 0) this.release();
  }

  private release(): void {
    for (const fd of this.files.values()) closeSync(fd);
    this.files.clear();
  }

  /**
   * A shared sync in the thread pool for every flush asked so far and not yet covered by a sync
   * started, while some wait and fewer than IN_FLIGHT run. A sync that ends covers all that was
   * written before it started, whatever other syncs still run.
   */
  private start(): void {
    if (this.failure || this.closed || this.waiters.length === 0) return;
    if (!this.pending) {
      this.settle(this.asked);
      return;
    }
    if (this.running >= IN_FLIGHT || this.asked <= this.started) return;
    const upTo = this.asked;
    this.started = upTo;
    const paths = [...this.dirty];
    this.dirty.clear();
    this.inflight.push(...paths);
    this.running++;
    const syncs = paths.map((path) => {
      const fd = this.files.get(path)!;
      return new Promise<void>((resolve, reject) => fdatasync(fd, (e) => (e ? reject(e) : resolve())));
    });
    const done = (e?: unknown) => {
      this.running--;
      for (const path of paths) this.inflight.splice(this.inflight.indexOf(path), 1);
      if (this.closed) {
        if (this.running === 0) this.release(); // close() synced it all in line
        return;
      }
      if (e !== undefined) {
        this.fail(e);
        return;
      }
      this.stats.grouped++;
      this.settle(upTo);
      this.start();
    };
    Promise.all(syncs).then(
      () => done(),
      (e: unknown) => done(e ?? new Error('fdatasync failed')),
    );
  }

  /** Flushes up to `upTo` are on disk: answer their waiters, let go of segments no longer written. */
  private settle(upTo: number): void {
    if (upTo > this.synced) this.synced = upTo;
    let kept = 0;
    for (const w of this.waiters) {
      if (w.upTo <= this.synced) w.resolve();
      else this.waiters[kept++] = w;
    }
    this.waiters.length = kept;
    if (this.files.size > 1 && this.running === 0)
      for (const [path, fd] of this.files)
        if (path !== this.latest && !this.dirty.has(path)) {
          closeSync(fd);
          this.files.delete(path);
        }
  }

  private fail(e: unknown): Error {
    if (this.failure) return this.failure;
    const err = e instanceof Error ? e : new Error(String(e));
    this.failure = new Error(`could not sync the WAL: ${err.message}`, { cause: err });
    for (const w of this.waiters.splice(0)) w.reject(this.failure);
    this.onFailure(this.failure);
    return this.failure;
  }
}
