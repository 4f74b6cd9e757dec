/**
 * The delivery worker: claims due jobs, hands them to SMTP, records the outcome.
 *
 * - Wake-ups: NOTIFY on `basalt_mail` when a job is queued, a timer for the next
 *   retry this instance scheduled, and a poll (every second) as the fallback for a
 *   lost notification or another instance's retry.
 * - At most `mail.concurrency` sends at once per instance.
 * - Leases: a claimed job carries `lease_until`; if this process dies, another
 *   instance (or this one after a restart) reclaims it once the lease has passed.
 *   With the embedded engine only one process can own the database, so `sending`
 *   jobs found at start are orphans and go straight back to the queue.
 * - Shutdown: stop claiming, let in-flight sends finish for a few seconds, then
 *   release what is still claimed so it is not stuck until its lease expires.
 */
import { hostname } from 'node:os';
import type { Db } from '../../db/engine';
import type { Settings } from '../../config/settings';
import type { Logger } from '../../log';
import { buryAbandoned, claimJobs, markFailed, markSentMany, purge, releaseJobs, requeueOrphans, type JobRow } from './jobs';
import { SmtpSendError, type SmtpTransport } from './smtp';

export const MAIL_CHANNEL = 'basalt_mail';
const POLL_MS = 1000;
const PURGE_EVERY_MS = 60 * 60 * 1000;
const SHUTDOWN_GRACE_MS = 5000;
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
}

export class MailWorker {
  readonly id = `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Claimed (leased to us) but not started yet: one claim fills the free slots plus one round ahead. */
  private buffer: { job: JobRow; claimedAt: number }[] = [];
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
  private purgeTimer?: Timer;
  private retryTimer?: { at: number; timer: Timer };
  private unlisten?: () => Promise<void>;
  private stopSettings?: () => void;

  constructor(private readonly d: WorkerDeps) {}

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
    this.poll = setInterval(() => {
      // Jobs whose instance died on their last attempt: settle them as dead once their lease passed.
      buryAbandoned(db).catch(() => {});
      this.wake();
    }, POLL_MS);
    this.purgeTimer = setInterval(() => void this.purgeNow(), PURGE_EVERY_MS);
    void this.purgeNow();
    this.wake();
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
      if (this.buffer.length) await releaseJobs(db, this.buffer.splice(0).map((b) => b.job.id), this.id).catch(() => {});
      return;
    }
    try {
      for (;;) {
        if (!this.running) return;
        const concurrency = settings.get<number>('mail.concurrency');
        const leaseMs = settings.get<number>('mail.lease_ms');
        while (this.inFlight.size < concurrency && this.buffer.length) {
          const { job, claimedAt } = this.buffer.shift()!;
          // Past half its lease, another instance may soon take it over: starting now could
          // send it twice. Leave it; it is claimable again once the lease expires.
          if (Date.now() - claimedAt > leaseMs / 2) continue;
          this.begin(job);
        }
        const free = concurrency - this.inFlight.size;
        if (free <= 0) return;
        // Claiming costs a commit; taking one round ahead keeps the connections busy
        // without a database round trip between two sends.
        const claimedAt = Date.now();
        const jobs = await claimJobs(db, this.id, free + concurrency, leaseMs);
        if (this.claimFailing) {
          this.claimFailing = false;
          log.info('mail worker: claiming jobs works again');
        }
        for (const job of jobs) this.buffer.push({ job, claimedAt });
        if (!jobs.length) return;
      }
    } catch (e) {
      // Once per outage, not once per poll.
      if (!this.claimFailing) log.warn('mail worker: claiming jobs failed; retrying every second', { cause: e });
      this.claimFailing = true;
    }
  }

  private begin(job: JobRow): void {
    const p = this.deliver(job).finally(() => {
      this.inFlight.delete(job.id);
      this.wake();
    });
    this.inFlight.set(job.id, p);
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

  private async deliver(job: JobRow): Promise<void> {
    const { db, settings, log, smtp } = this.d;
    try {
      const res = await smtp.send({
        to: job.recipients,
        subject: job.subject,
        text: job.text ?? undefined,
        html: job.html ?? undefined,
        messageId: job.message_id,
        headers: { 'X-Basalt-Job-Id': job.id },
      });
      const note = res.rejected.length ? `the server refused some recipients: ${res.rejected.join(', ')}` : null;
      // The slot is free as soon as the server accepted; the `sent` mark is written in the next batch.
      this.pendingMarks.add(this.recordSent(job.id, note));
      log.debug('mail sent', { job_id: job.id, attempt: job.attempts });
    } catch (e) {
      const err = e instanceof SmtpSendError ? e : new SmtpSendError('sending failed', false, e);
      const delay = retryDelay(job.attempts, settings.get<number>('mail.retry_base_ms'));
      try {
        const state = await markFailed(db, job.id, this.id, err.reason, err.permanent, delay);
        (state === 'dead' ? log.warn : log.info)('mail attempt failed', { job_id: job.id, attempt: job.attempts, state, reason: err.reason, cause: err.cause });
        if (state === 'failed') this.wakeAt(Date.now() + delay);
      } catch (dbErr) {
        // The lease will expire and the job be retried by whoever claims it next.
        log.warn('mail worker: could not record a failed attempt', { job_id: job.id, cause: dbErr });
      }
    }
  }

  /** Wake when this instance's earliest scheduled retry is due (the poll covers the rest). */
  private wakeAt(at: number): void {
    if (this.retryTimer && this.retryTimer.at <= at) return;
    if (this.retryTimer) clearTimeout(this.retryTimer.timer);
    const timer = setTimeout(() => {
      this.retryTimer = undefined;
      this.wake();
    }, Math.max(at - Date.now(), 0) + 5);
    this.retryTimer = { at, timer };
  }

  async purgeNow(): Promise<{ jobs: number; idempotency: number } | undefined> {
    try {
      const r = await purge(this.d.db, this.d.settings.get<number>('mail.job_retention_days'));
      if (r.jobs || r.idempotency) this.d.log.info('mail records purged', r);
      return r;
    } catch (e) {
      this.d.log.warn('mail purge failed', { cause: e });
      return undefined;
    }
  }

  /** Stop claiming; wait briefly for sends in flight; give back what is still claimed. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    await this.starting?.catch(() => {});
    clearInterval(this.poll);
    clearInterval(this.purgeTimer);
    this.stopSettings?.();
    if (this.retryTimer) clearTimeout(this.retryTimer.timer);
    await this.unlisten?.().catch(() => {});
    const pending = [...this.inFlight.values()];
    let timer: Timer | undefined;
    await Promise.race([Promise.allSettled(pending), new Promise((r) => (timer = setTimeout(r, SHUTDOWN_GRACE_MS)))]);
    clearTimeout(timer);
    await Promise.allSettled([...this.pendingMarks]);
    const left = [...this.inFlight.keys(), ...this.buffer.splice(0).map((b) => b.job.id)];
    if (left.length) {
      const n = await releaseJobs(this.d.db, left, this.id).catch(() => 0);
      this.d.log.info('mail jobs released at shutdown', { released: n });
    }
  }
}
