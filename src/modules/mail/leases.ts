/**
 * Leasing (docs/mail.md, "The queue"): every statement that moves a job while an instance
 * holds it, and the heartbeat that keeps those leases alive.
 *
 * A claim sets `lease_until` and `claimed_by`; the holder renews the lease every lease/3
 * while the send runs, and ends it with an outcome (sent, failed, dead) or gives the job
 * back. Every statement after the claim is guarded by `claimed_by`, so a job reclaimed by
 * another instance (lease expired) is never touched by the one that lost it. Claiming uses
 * FOR UPDATE SKIP LOCKED so any number of instances share one queue without sending a job
 * twice.
 */
import type { Db, Queryable } from '../../db/engine';
import type { Settings } from '../../config/settings';
import type { Logger } from '../../log';
import type { JobRow, JobState } from './jobs';

/**
 * Claim up to `n` due jobs for `worker`: queued or failed jobs whose time has come,
 * and queued jobs still `sending` under an expired lease (their instance died).
 * Sync jobs are never resent by the queue: their caller was told the outcome.
 * `exclude`: jobs this instance still holds (sending or about to): never claimed twice by
 * the same worker, even if their lease could not be renewed in time.
 */
export async function claimJobs(
  q: Queryable,
  worker: string,
  n: number,
  leaseMs: number,
  exclude: string[] = [],
): Promise<JobRow[]> {
  const { rows } = await q.query<JobRow>(
    `UPDATE basalt.mail_jobs j
        SET state = 'sending', attempts = j.attempts + 1, lease_until = now() + ($3::int * interval '1 millisecond'),
            claimed_by = $1, updated_at = now()
      WHERE j.id IN (
        SELECT id FROM basalt.mail_jobs
         WHERE (state IN ('queued', 'failed') AND run_at <= now())
            OR (state = 'sending' AND NOT sync AND lease_until < now() AND attempts < max_attempts AND NOT (id = ANY($4::uuid[])))
         ORDER BY run_at
         LIMIT $2
         FOR UPDATE SKIP LOCKED)
      RETURNING j.*`,
    [worker, n, leaseMs, exclude],
  );
  return rows;
}

/**
 * Push the lease of jobs this worker still holds `leaseMs` into the future (the heartbeat
 * while a send runs). Returns the ids still ours; a missing one was taken over.
 */
export async function renewLeases(q: Queryable, ids: string[], worker: string, leaseMs: number): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const { rows } = await q.query<{ id: string }>(
    `UPDATE basalt.mail_jobs SET lease_until = now() + ($3::int * interval '1 millisecond')
      WHERE id = ANY($1::uuid[]) AND claimed_by = $2 AND state = 'sending'
      RETURNING id`,
    [ids, worker, leaseMs],
  );
  return new Set(rows.map((r) => r.id));
}

/**
 * Jobs whose instance died during their last allowed attempt (or during a sync
 * send) cannot be claimed again: mark them dead so they do not stay `sending`.
 */
export async function buryAbandoned(q: Queryable, ignoreLease = false): Promise<number> {
  const r = await q.query(
    `UPDATE basalt.mail_jobs SET state = 'dead', lease_until = NULL, updated_at = now(),
            last_error = coalesce(last_error || '; ', '') || 'the instance sending it stopped before the outcome was known'
      WHERE state = 'sending' AND (lease_until < now() OR $1) AND (sync OR attempts >= max_attempts)`,
    [ignoreLease],
  );
  return r.rowCount;
}

/**
 * When the queue next has work for a worker, as far as the rows show: the earliest `run_at` of
 * a queued or failed job, or the earliest lease of a job being sent (reclaimed, or settled as
 * dead, once it passes); milliseconds since the epoch, null when neither exists. Both are
 * read from their partial indexes (040_mail.sql).
 */
export async function nextDue(q: Queryable): Promise<number | null> {
  const { rows } = await q.query<{ at: number | null }>(
    `SELECT (extract(epoch FROM least(
              (SELECT min(run_at) FROM basalt.mail_jobs WHERE state IN ('queued', 'failed')),
              (SELECT min(lease_until) FROM basalt.mail_jobs WHERE state = 'sending'))) * 1000)::float8 AS at`,
  );
  const at = rows[0]?.at;
  return at === null || at === undefined ? null : Number(at);
}

/** Embedded engine only: one process owns the database, so every `sending` job at start is an orphan. */
export async function requeueOrphans(q: Queryable): Promise<number> {
  const r = await q.query(
    `UPDATE basalt.mail_jobs SET state = 'queued', lease_until = NULL, claimed_by = NULL, run_at = now(), updated_at = now()
      WHERE state = 'sending' AND NOT sync AND attempts < max_attempts`,
  );
  return r.rowCount;
}

/** The server accepted the message. Guarded by the claim, so a job reclaimed by another instance is not touched. */
export async function markSent(q: Queryable, id: string, worker: string, note: string | null): Promise<void> {
  await q.query(
    `UPDATE basalt.mail_jobs SET state = 'sent', sent_at = now(), lease_until = NULL, last_error = $3, updated_at = now()
      WHERE id = $1 AND claimed_by = $2 AND state = 'sending'`,
    [id, worker, note],
  );
}

/** Several accepted sends at once (the worker batches them: one commit for many). */
export async function markSentMany(
  q: Queryable,
  worker: string,
  sent: { id: string; note: string | null }[],
): Promise<void> {
  if (!sent.length) return;
  await q.query(
    `UPDATE basalt.mail_jobs j SET state = 'sent', sent_at = now(), lease_until = NULL, last_error = v.note, updated_at = now()
       FROM unnest($1::uuid[], $2::text[]) AS v(id, note)
      WHERE j.id = v.id AND j.claimed_by = $3 AND j.state = 'sending'`,
    [sent.map((s) => s.id), sent.map((s) => s.note), worker],
  );
}

/** An attempt failed: retry at `retryAt`, or dead when attempts are used up or the refusal is permanent. */
export async function markFailed(
  q: Queryable,
  id: string,
  worker: string,
  error: string,
  dead: boolean,
  retryInMs: number,
): Promise<JobState> {
  const { rows } = await q.query<{ state: JobState }>(
    `UPDATE basalt.mail_jobs
        SET state = CASE WHEN $4 OR attempts >= max_attempts THEN 'dead' ELSE 'failed' END,
            last_error = $3, lease_until = NULL, updated_at = now(),
            run_at = now() + ($5::int * interval '1 millisecond')
      WHERE id = $1 AND claimed_by = $2 AND state = 'sending'
      RETURNING state`,
    [id, worker, error.slice(0, 1000), dead, Math.round(retryInMs)],
  );
  return rows[0]?.state ?? 'sending';
}

/** Give claimed, not yet attempted work back (graceful shutdown): the attempt does not count. */
export async function releaseJobs(q: Queryable, ids: string[], worker: string): Promise<number> {
  if (!ids.length) return 0;
  const r = await q.query(
    `UPDATE basalt.mail_jobs SET state = CASE WHEN attempts > 1 THEN 'failed' ELSE 'queued' END, attempts = greatest(attempts - 1, 0),
            lease_until = NULL, claimed_by = NULL, run_at = now(), updated_at = now()
      WHERE id = ANY($1::uuid[]) AND claimed_by = $2 AND state = 'sending'`,
    [ids, worker],
  );
  return r.rowCount;
}

/** What the heartbeat renews, and whom it tells what it kept. */
export interface LeaseHolder {
  /** Every job whose lease this worker holds (sending, claimed ahead, or a sync send). */
  held(): string[];
  /** After a renewal that started at `at`: `ours` are the ids of `ids` still leased to this worker. */
  renewed(ids: string[], ours: Set<string>, at: number): void;
}

/**
 * The heartbeat: while the holder holds leases, renew them every lease/3 (a sync send's
 * lease also keeps its idempotency key in flight), so a slow SMTP server never gets a
 * send settled as abandoned or reclaimed by another instance mid-send. One renewal at a
 * time; never keeps a process alive (one-shot CLI commands send through the same service).
 */
export class LeaseHeartbeat {
  private timer?: Timer;
  private renewing = false;
  /** Stopped: no more renewals (a send still stuck is left to its lease). */
  private closed = false;

  constructor(private readonly d: { db: Db; settings: Settings; log: Logger; worker: string; holder: LeaseHolder }) {}

  /** Make sure a renewal is scheduled (called whenever a lease is taken). */
  keep(): void {
    if (this.timer || this.renewing || this.closed) return;
    const every = Math.max(Math.floor(this.d.settings.get('mail.lease_ms') / 3), 50);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.renewNow();
    }, every);
    this.timer.unref?.();
  }

  private async renewNow(): Promise<void> {
    const { db, settings, log, worker, holder } = this.d;
    const ids = holder.held();
    if (!ids.length) return;
    this.renewing = true;
    const at = Date.now();
    try {
      const leaseMs = settings.get('mail.lease_ms');
      const ours = await renewLeases(db, ids, worker, leaseMs);
      holder.renewed(ids, ours, at);
    } catch (e) {
      // Retried at the next beat; the half-lease rule keeps claimed-ahead jobs from starting late.
      log.warn('mail worker: could not renew leases', { jobs: ids.length, cause: e });
    } finally {
      this.renewing = false;
    }
    if (holder.held().length) this.keep();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }
}
