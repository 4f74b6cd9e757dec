/**
 * The delivery worker (docs/mail.md, "The queue"): claims due jobs, hands them to SMTP,
 * records the outcome. The statements it runs and the lease heartbeat are in leases.ts.
 *
 * - Wake-ups: NOTIFY on `basalt_mail` when a job is queued, a timer for the next
 *   retry this instance scheduled, and a poll (every second) as the fallback for a
 *   lost notification, a failed LISTEN or another instance's retry. On the embedded
 *   engine the process is alone with its queue and the mail service wakes the worker
 *   itself after each commit, so the poll runs once a minute, and a look that finds
 *   nothing to claim sets a timer for the earliest `run_at` or lease in the queue
 *   (`nextDue`): a retry or a lease that passes is looked at when it is due, as the
 *   one-second poll would have (docs/mail.md, "The queue").
 * - At most `mail.concurrency` sends at once per instance.
 * - Leases: a claimed job carries `lease_until`; if this process dies, another
 *   instance (or this one after a restart) reclaims it once the lease has passed.
 *   With the embedded engine only one process can own the database, so `sending`
 *   jobs found at start are orphans and go straight back to the queue.
 *   While a send runs its lease is renewed every lease/3 (a slow SMTP server may take
 *   far longer than `mail.lease_ms`), and claims never take a job this worker holds.
 * - Shutdown: stop claiming, give back jobs claimed but not started, let started sends
 *   finish for a few seconds, then abort the ones still running (the connection is
 *   closed before the server accepted) and give those back too. A started send is
 *   never given back while it could still be accepted: that would deliver it twice.
 */
import { hostname } from 'node:os';
import type { Db } from '../../db/engine';
import type { Settings } from '../../config/settings';
import type { Logger } from '../../log';
import type { JobRow } from './jobs';
import { MAIL_CHANNEL } from './accept';
import {
  buryAbandoned,
  claimJobs,
  LeaseHeartbeat,
  markFailed,
  markSentMany,
  nextDue,
  releaseJobs,
  requeueOrphans,
} from './leases';
import { SmtpSendError, type SmtpTransport } from './smtp';
import { within } from '../../util/timeout';

const POLL_MS = 1000;
/** The embedded engine's poll: only a backstop for rows written around the mail service (e.g. in SQL). */
const EMBEDDED_POLL_MS = 60_000;
const SHUTDOWN_GRACE_MS = 5000;
/** After aborting the sends still running at shutdown, how long to wait for them to unwind. */
const ABORT_GRACE_MS = 2000;
/** Retries never wait longer than this, whatever the attempt number. */
const MAX_RETRY_DELAY_MS = 6 * 60 * 60 * 1000;

/**
 * Delay before retry number `attempt` (1 = after the first failure): base · 2^(attempt−1),
 * with "equal jitter" (half fixed, half random) so instances retrying after one outage
 * do not hit the server in lockstep.
 */
export function retryDelay(attempt: number, baseMs: number, random = Math.random): number {
  const exp = Math.min(baseMs * 2 ** Math.max(attempt - 1, 0), MAX_RETRY_DELAY_MS);
  return Math.round(exp / 2 + random() * (exp / 2));
}

export interface WorkerDeps {
  db: Db;
  settings: Settings;
  log: Logger;
  smtp: SmtpTransport;
  /** Poll interval (default 1 s). Internal: tests stretch it to prove NOTIFY alone wakes the worker. */
  pollMs?: number;
  /** How long stop() lets started sends finish before aborting them (default 5 s). */
  shutdownGraceMs?: number;
}

export class MailWorker {
  readonly id = `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  private readonly inFlight = new Map<string, Promise<void>>();
  /** One per send in flight: aborted at shutdown if the server has not answered by then. */
  private readonly aborts = new Map<string, AbortController>();
  /** Sends aborted at shutdown: not accepted by the server, given back to the queue. */
  private readonly aborted = new Set<string>();
  /** Sync sends (service.sendNow, submit) of this process: their leases are renewed like the worker's. */
  private readonly syncSends = new Set<string>();
  /** Claimed (leased to us) but not started yet: one claim fills the free slots plus one round ahead. */
  private buffer: { job: JobRow; leasedAt: number }[] = [];
  private readonly heartbeat: LeaseHeartbeat;
  /** Sends the server accepted, waiting to be written as `sent` in one statement. */
  private sentQueue: { id: string; note: string | null; done: () => void }[] = [];
  private flushing = false;
  private claimFailing = false;
  private readonly pendingMarks = new Set<Promise<void>>();
  private running = false;
  private starting?: Promise<void>;
  private pumping = false;
  private again = false;
  private poll?: Timer;
  private retryTimer?: { at: number; timer: Timer };
  /** The embedded engine: the next wake follows the queue's earliest due time (`nextDue`). */
  private followDue = false;
  private unlisten?: () => Promise<void>;
  private stopSettings?: () => void;

  constructor(private readonly d: WorkerDeps) {
    this.heartbeat = new LeaseHeartbeat({
      db: d.db,
      settings: d.settings,
      log: d.log,
      worker: this.id,
      holder: {
        held: () => this.heldIds(),
        renewed: (ids, ours, at) => {
          for (const b of this.buffer) if (ours.has(b.job.id)) b.leasedAt = at;
          const lost = ids.filter((id) => !ours.has(id) && (this.inFlight.has(id) || this.syncSends.has(id)));
          if (lost.length)
            d.log.warn('mail worker: lease of a send in progress was lost (another instance may send it too)', {
              jobs: lost,
            });
        },
      },
    });
  }

  get active(): boolean {
    return this.running;
  }

  /** Start once; `stop()` waits for a start in progress, so no timer outlives the platform. */
  start(): Promise<void> {
    if (!this.starting) {
      this.running = true;
      this.starting = this.setUp();
    }
    return this.starting;
  }

  private async setUp(): Promise<void> {
    const { db, log } = this.d;
    if (db.kind === 'embedded') {
      try {
        const back = await requeueOrphans(db);
        const buried = await buryAbandoned(db, true);
        if (back || buried) log.info('mail jobs left by the previous run', { requeued: back, dead: buried });
      } catch (e) {
        log.warn('mail worker: could not requeue jobs of the previous run; their leases will expire', { cause: e });
      }
    }
    try {
      this.unlisten = await db.listen(MAIL_CHANNEL, () => this.wake());
    } catch (e) {
      log.warn('mail worker: LISTEN failed, polling only', { cause: e });
    }
    // Mail just configured, concurrency raised: look for work now rather than at the next poll.
    this.stopSettings = this.d.settings.onChange((keys) => {
      if (keys.some((k) => k.startsWith('mail.'))) this.wake();
    });
    this.followDue = db.kind === 'embedded';
    this.poll = setInterval(() => this.tick(), this.d.pollMs ?? (this.followDue ? EMBEDDED_POLL_MS : POLL_MS));
    this.wake();
  }

  /** The poll: settle abandoned jobs, then look for work. */
  private tick(): void {
    // Jobs whose instance died on their last attempt: settle them as dead once their lease passed.
    buryAbandoned(this.d.db).catch((e) => this.d.log.warn('mail worker: settling abandoned jobs failed', { cause: e }));
    this.wake();
  }

  /**
   * The embedded engine, nothing claimable now: wake when the queue's earliest job or lease
   * is due. One that is due already but was not claimed (held by this worker, or locked by a
   * transaction) is looked at again after POLL_MS, as the one-second poll did.
   */
  private async followQueue(): Promise<void> {
    let at: number | null;
    try {
      at = await nextDue(this.d.db);
    } catch {
      at = 0;
    }
    if (at === null) return;
    const now = Date.now();
    this.wakeAt(at > now ? at : now + POLL_MS);
  }

  /** Look for work now (called on NOTIFY, timers, and after each send). */
  wake(): void {
    if (!this.running) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    void this.pump().finally(() => {
      this.pumping = false;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  private async pump(): Promise<void> {
    const { db, settings, log, smtp } = this.d;
    if (!smtp.configured()) {
      // Jobs wait in the queue until mail is configured; give back any we hold.
      if (this.buffer.length)
        await releaseJobs(
          db,
          this.buffer.splice(0).map((b) => b.job.id),
          this.id,
        ).catch((e) => log.warn('mail worker: giving back held jobs failed (their leases pass)', { cause: e }));
      return;
    }
    try {
      for (;;) {
        if (!this.running) return;
        const concurrency = settings.get('mail.concurrency');
        const leaseMs = settings.get('mail.lease_ms');
        while (this.inFlight.size < concurrency && this.buffer.length) {
          const { job, leasedAt } = this.buffer.shift()!;
          // Past half its lease (renewals failing), another instance may soon take it over:
          // starting now could send it twice. Leave it; it is claimable again once the lease expires.
          if (Date.now() - leasedAt > leaseMs / 2) continue;
          this.begin(job);
        }
        const free = concurrency - this.inFlight.size;
        if (free <= 0) return;
        // Claiming costs a commit; taking one round ahead keeps the connections busy
        // without a database round trip between two sends.
        const leasedAt = Date.now();
        const jobs = await claimJobs(db, this.id, free + concurrency, leaseMs, this.heldIds());
        if (this.claimFailing) {
          this.claimFailing = false;
          log.info('mail worker: claiming jobs works again');
        }
        for (const job of jobs) this.buffer.push({ job, leasedAt });
        if (jobs.length) this.heartbeat.keep();
        if (!jobs.length) {
          if (this.followDue) await this.followQueue();
          return;
        }
      }
    } catch (e) {
      // Once per outage, not once per poll.
      if (!this.claimFailing) log.warn('mail worker: claiming jobs failed; retrying every second', { cause: e });
      this.claimFailing = true;
      if (this.followDue) this.wakeAt(Date.now() + POLL_MS);
    }
  }

  private begin(job: JobRow): void {
    const abort = new AbortController();
    this.aborts.set(job.id, abort);
    const p = this.deliver(job, abort.signal).finally(() => {
      this.inFlight.delete(job.id);
      this.aborts.delete(job.id);
      this.wake();
    });
    this.inFlight.set(job.id, p);
    this.heartbeat.keep();
  }

  /** Every job whose lease this process holds: sending, claimed ahead, or a sync send. */
  private heldIds(): string[] {
    return [...this.inFlight.keys(), ...this.buffer.map((b) => b.job.id), ...this.syncSends.keys()];
  }

  /**
   * A sync send leased to this worker: its lease (which also keeps its idempotency key
   * in flight) is renewed until the returned function is called, so a slow server never
   * gets it settled as abandoned or its key taken over by a duplicate.
   */
  holdSync(id: string): () => void {
    this.syncSends.add(id);
    this.heartbeat.keep();
    return () => this.syncSends.delete(id);
  }

  /** Record a delivery; concurrent ones are written together (one commit for many). */
  private recordSent(id: string, note: string | null): Promise<void> {
    const p: Promise<void> = new Promise<void>((done) => {
      this.sentQueue.push({ id, note, done });
      if (!this.flushing) void this.flushSent();
    }).finally(() => this.pendingMarks.delete(p));
    return p;
  }

  private async flushSent(): Promise<void> {
    this.flushing = true;
    try {
      while (this.sentQueue.length) {
        const batch = this.sentQueue.splice(0, 500);
        try {
          await markSentMany(this.d.db, this.id, batch);
        } catch (e) {
          // The lease will expire and the job be sent again: at-least-once, never lost.
          this.d.log.warn('mail worker: could not record sent jobs', { jobs: batch.length, cause: e });
        }
        for (const b of batch) b.done();
      }
    } finally {
      this.flushing = false;
    }
  }

  private async deliver(job: JobRow, signal: AbortSignal): Promise<void> {
    const { db, settings, log, smtp } = this.d;
    try {
      const res = await smtp.send({
        to: job.recipients,
        subject: job.subject,
        text: job.text ?? undefined,
        html: job.html ?? undefined,
        messageId: job.message_id,
        headers: { 'X-Basalt-Job-Id': job.id },
        signal,
      });
      const note = res.rejected.length ? `the server refused some recipients: ${res.rejected.join(', ')}` : null;
      // The slot is free as soon as the server accepted; the `sent` mark is written in the next batch.
      this.pendingMarks.add(this.recordSent(job.id, note));
      log.debug('mail sent', { job_id: job.id, attempt: job.attempts });
    } catch (e) {
      if (signal.aborted) {
        // Shutdown closed the connection before the server answered: stop() gives it back.
        this.aborted.add(job.id);
        return;
      }
      const err = e instanceof SmtpSendError ? e : new SmtpSendError('sending failed', false, e);
      const delay = retryDelay(job.attempts, settings.get('mail.retry_base_ms'));
      try {
        const state = await markFailed(db, job.id, this.id, err.reason, err.permanent, delay);
        (state === 'dead' ? log.warn : log.info)('mail attempt failed', {
          job_id: job.id,
          attempt: job.attempts,
          state,
          reason: err.reason,
          cause: err.cause,
        });
        if (state === 'failed') this.wakeAt(Date.now() + delay);
      } catch (dbErr) {
        // The lease will expire and the job be retried by whoever claims it next.
        log.warn('mail worker: could not record a failed attempt', { job_id: job.id, cause: dbErr });
      }
    }
  }

  /**
   * Wake when this instance's earliest scheduled retry is due (the poll covers the rest); on
   * the embedded engine also when the queue's earliest job or lease is (`followQueue`), with
   * the poll's work, since that timer stands in for it.
   */
  private wakeAt(at: number): void {
    if (!this.running) return;
    if (this.retryTimer && this.retryTimer.at <= at) return;
    if (this.retryTimer) clearTimeout(this.retryTimer.timer);
    const timer = setTimeout(
      () => {
        this.retryTimer = undefined;
        if (this.followDue) this.tick();
        else this.wake();
      },
      Math.max(at - Date.now(), 0) + 5,
    );
    this.retryTimer = { at, timer };
  }

  /**
   * Stop claiming and give back jobs claimed but not started; let started sends finish
   * (up to the grace), abort those still waiting for the server, give them back too.
   * Leases are renewed until the last send has settled.
   */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    await this.starting?.catch(() => {}); // a failed start was logged where it failed
    clearInterval(this.poll);
    this.stopSettings?.();
    if (this.retryTimer) clearTimeout(this.retryTimer.timer);
    await this.unlisten?.().catch(() => {}); // stopping: the connection that listened is closing anyway
    const { db, log } = this.d;
    let released = 0;
    const notStarted = this.buffer.splice(0).map((b) => b.job.id);
    if (notStarted.length) released += await releaseJobs(db, notStarted, this.id).catch(() => 0);
    if (!(await settled([...this.inFlight.values()], this.d.shutdownGraceMs ?? SHUTDOWN_GRACE_MS))) {
      for (const a of this.aborts.values()) a.abort(new Error('the instance is stopping'));
      if (!(await settled([...this.inFlight.values()], ABORT_GRACE_MS))) {
        // Not even the abort unwound them: leave them leased; another instance (or the next start) reclaims them.
        log.warn('mail worker: sends still running at shutdown are left to their lease', { jobs: this.inFlight.size });
      }
    }
    await Promise.allSettled([...this.pendingMarks]);
    const aborted = [...this.aborted];
    this.aborted.clear();
    if (aborted.length) released += await releaseJobs(db, aborted, this.id).catch(() => 0);
    if (released) log.info('mail jobs released at shutdown', { released });
    this.heartbeat.close();
  }
}

/** True when every promise settled within `ms`. */
function settled(ps: Promise<unknown>[], ms: number): Promise<boolean> {
  return ps.length ? within(Promise.allSettled(ps), ms) : Promise.resolve(true);
}
