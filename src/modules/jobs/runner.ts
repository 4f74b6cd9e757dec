/**
 * The job runner of one instance (docs/extensions.md, "Jobs"): claims due jobs of the
 * definitions this process knows, runs their handlers, records the outcome. The statements
 * are in store.ts.
 *
 * - Wake-ups: NOTIFY `basalt_jobs` at the commit of a new job, this runner's own retries and
 *   ends, and a poll every second (other instances' retries, a lost notification).
 * - Leases: a claim sets `lease_until`; while a handler runs the runner renews it every third
 *   of `jobs.lease_ms`. A runner that dies stops renewing, and once the lease has passed any
 *   instance claims the job again (the attempt counts); one that loses a lease aborts the
 *   handler's signal and leaves the job alone.
 * - Timeouts and shutdown abort `job.signal`; a timed-out attempt fails (retried after the
 *   backoff), an attempt ended by shutdown is given back without counting.
 */
import { hostname } from 'node:os';
import type { Db } from '../../db/engine';
import type { Settings } from '../../config/settings';
import type { Logger } from '../../log';
import {
  buryAbandoned,
  claimJobs,
  JOBS_CHANNEL,
  markFailed,
  markSucceeded,
  purgeEnded,
  releaseJobs,
  renewLeases,
  requeueOrphans,
  type JobKind,
  type JobRow,
} from './store';

const POLL_MS = 1000;
/** How long stop() lets aborted handlers unwind before giving their jobs back anyway. */
const STOP_GRACE_MS = 3000;
const MAX_BACKOFF_MS = 6 * 60 * 60 * 1000;
const PURGE_EVERY_MS = 60 * 60 * 1000;
const PURGE_BATCH = 1000;

/** What a handler receives. */
export interface Job<P = unknown> {
  id: string;
  payload: P;
  /** 1 for the first attempt. */
  attempt: number;
  /** Aborted at the definition's timeoutMs, on shutdown, and when this instance lost the job. */
  signal: AbortSignal;
}

export interface JobOptions {
  /** Attempts before the job is dead (default 3). */
  attempts?: number;
  /** Delay before retry n: backoffMs · 2^(n−1) (exponential, the default) or backoffMs (fixed). */
  backoff?: 'exponential' | 'fixed';
  /** Base delay between attempts (default 1000 ms). */
  backoffMs?: number;
  /** An attempt running longer fails, and its signal aborts. */
  timeoutMs?: number;
  /** Handlers of this definition running at once on one instance (default 1). */
  concurrency?: number;
}

export interface Definition {
  extension: string;
  name: string;
  kind: JobKind;
  run(job: Job): Promise<unknown>;
  attempts: number;
  backoff: 'exponential' | 'fixed';
  backoffMs: number;
  timeoutMs?: number;
  concurrency: number;
}

/** Delay before the retry after failed attempt `attempt`. */
export function backoffDelay(def: Pick<Definition, 'backoff' | 'backoffMs'>, attempt: number): number {
  if (def.backoff === 'fixed') return def.backoffMs;
  return Math.min(def.backoffMs * 2 ** Math.max(attempt - 1, 0), MAX_BACKOFF_MS);
}

function message(e: unknown): string {
  if (e instanceof Error) return e.stack ?? e.message;
  return String(e);
}

interface Held {
  row: JobRow;
  abort: AbortController;
  /** Why the signal was aborted, when it was. */
  why?: 'timeout' | 'shutdown' | 'lost';
}

export class JobRunner {
  readonly worker = `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  private readonly held = new Map<string, Held>();
  private readonly running = new Map<string, number>();
  private readonly settled = new Set<Promise<void>>();
  private stopping = false;
  private ticking = false;
  private again = false;
  private poll?: Timer;
  private beat?: Timer;
  private purge?: Timer;
  private unlisten?: () => Promise<void>;

  constructor(private readonly d: { db: Db; settings: Settings; log: Logger; definitions: () => Definition[] }) {}

  async start(): Promise<void> {
    const { db } = this.d;
    if (db.kind === 'embedded') await requeueOrphans(db);
    try {
      this.unlisten = await db.listen(JOBS_CHANNEL, () => this.wake());
    } catch (e) {
      this.d.log.warn('jobs: LISTEN failed; polling only', { cause: e });
    }
    if (this.stopping) return void (await this.unlisten?.().catch(() => {}));
    this.poll = setInterval(() => this.wake(), POLL_MS);
    this.purge = setInterval(() => void this.purgeOld(), PURGE_EVERY_MS);
    this.wake();
  }

  /** Jobs that ended more than jobs.retention_days ago go, in batches (hourly). */
  private async purgeOld(): Promise<void> {
    try {
      const days = this.d.settings.get('jobs.retention_days');
      while (!this.stopping && (await purgeEnded(this.d.db, days, PURGE_BATCH)) === PURGE_BATCH) {}
    } catch (e) {
      this.d.log.warn('jobs: purging ended jobs failed', { cause: e });
    }
  }

  /** Look for due jobs now (coalesced with a look under way). */
  wake(): void {
    if (this.stopping) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = true;
    void this.tick()
      .catch((e) => this.d.log.warn('jobs: claiming failed', { cause: e }))
      .finally(() => {
        this.ticking = false;
        if (this.again) {
          this.again = false;
          // A macrotask away: on the embedded engine statements resolve as microtasks.
          setImmediate(() => this.wake());
        }
      });
  }

  private async tick(): Promise<void> {
    const defs = this.d.definitions();
    if (!defs.length) return;
    const { db, settings } = this.d;
    await buryAbandoned(db);
    const leaseMs = settings.get('jobs.lease_ms');
    for (const def of defs) {
      const key = `${def.extension}/${def.name}`;
      const free = def.concurrency - (this.running.get(key) ?? 0);
      if (free <= 0 || this.stopping) continue;
      const rows = await claimJobs(db, def, this.worker, free, leaseMs);
      for (const row of rows) this.launch(def, key, row);
    }
  }

  private launch(def: Definition, key: string, row: JobRow): void {
    this.running.set(key, (this.running.get(key) ?? 0) + 1);
    const held: Held = { row, abort: new AbortController() };
    this.held.set(row.id, held);
    this.keepBeating();
    const done = this.execute(def, held).finally(() => {
      this.held.delete(row.id);
      this.running.set(key, (this.running.get(key) ?? 1) - 1);
      this.settled.delete(done);
      this.wake();
    });
    this.settled.add(done);
  }

  private async execute(def: Definition, held: Held): Promise<void> {
    const { row, abort } = held;
    const { db, log } = this.d;
    let timer: Timer | undefined;
    const aborted = new Promise<never>((_, reject) => {
      abort.signal.addEventListener('abort', () => reject(abort.signal.reason), { once: true });
    });
    aborted.catch(() => {});
    if (def.timeoutMs)
      timer = setTimeout(() => {
        held.why ??= 'timeout';
        abort.abort(new Error(`timed out after ${def.timeoutMs} ms`));
      }, def.timeoutMs);
    let failure: { error: unknown } | undefined;
    try {
      await Promise.race([
        Promise.resolve().then(() =>
          def.run({ id: row.id, payload: row.payload, attempt: row.attempts, signal: abort.signal }),
        ),
        aborted,
      ]);
    } catch (e) {
      failure = { error: e };
    }
    clearTimeout(timer);
    if (held.why === 'lost') return;
    // Recording the outcome is the platform's work, not the job's: when the database fails it,
    // the job stays running until its lease runs out and is then tried again (at least once).
    try {
      if (!failure) return void (await markSucceeded(db, row.id, this.worker));
      if (held.why === 'shutdown') return void (await releaseJobs(db, [row.id], this.worker));
      const e = failure.error;
      const state = await markFailed(db, row.id, this.worker, message(e), backoffDelay(def, row.attempts));
      log.warn('jobs: an attempt failed', {
        extension: def.extension,
        job: def.name,
        id: row.id,
        attempt: row.attempts,
        state,
        error: e instanceof Error ? e.message : String(e),
      });
    } catch (e) {
      log.warn("jobs: a job's outcome could not be recorded; it is tried again when its lease runs out", {
        extension: def.extension,
        job: def.name,
        id: row.id,
        cause: e,
      });
    }
  }

  /** Renew the leases of held jobs every third of jobs.lease_ms while any are held. */
  private keepBeating(): void {
    if (this.beat) return;
    const every = Math.max(Math.floor(this.d.settings.get('jobs.lease_ms') / 3), 100);
    this.beat = setInterval(() => {
      const ids = [...this.held.keys()];
      if (!ids.length) {
        clearInterval(this.beat);
        this.beat = undefined;
        return;
      }
      renewLeases(this.d.db, ids, this.worker, this.d.settings.get('jobs.lease_ms'))
        .then((ours) => {
          for (const id of ids) {
            const h = this.held.get(id);
            if (h && !ours.has(id) && !h.why) {
              h.why = 'lost';
              h.abort.abort(new Error('the lease was lost: another instance took the job'));
            }
          }
        })
        .catch((e) => this.d.log.warn('jobs: could not renew leases', { cause: e }));
    }, every);
  }

  /** Stop claiming, abort running handlers, give back what has not ended within a grace. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearInterval(this.poll);
    clearInterval(this.purge);
    await this.unlisten?.().catch(() => {});
    for (const h of this.held.values()) {
      h.why ??= 'shutdown';
      h.abort.abort(new Error('the instance is shutting down'));
    }
    const all = Promise.allSettled([...this.settled]);
    await Promise.race([all, Bun.sleep(STOP_GRACE_MS)]);
    clearInterval(this.beat);
    const left = [...this.held.keys()];
    if (left.length) await releaseJobs(this.d.db, left, this.worker).catch(() => {});
  }
}
