/**
 * The queue's rows (`basalt.mail_jobs`) and every statement that moves a job
 * between states. Claiming uses FOR UPDATE SKIP LOCKED so any number of
 * instances share one queue without sending a job twice.
 *
 *   queued ──claim──▶ sending ──accepted──▶ sent
 *                        │
 *                        ├─temporary failure─▶ failed ──(run_at reached)──▶ claim again
 *                        └─last attempt / permanent refusal─▶ dead
 *   sending whose lease expired (instance died) ──▶ claimable again
 *   queued ──administrator cancels──▶ cancelled (never sent)
 */
import type { Queryable } from '../../db/engine';
import type { RenderedMail } from './message';

export type JobState = 'queued' | 'sending' | 'sent' | 'failed' | 'dead' | 'cancelled';

export interface JobRow {
  id: string;
  key_id: string | null;
  state: JobState;
  sync: boolean;
  recipients: string[];
  subject: string;
  text: string | null;
  html: string | null;
  template: string | null;
  message_id: string;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  run_at: Date;
  lease_until: Date | null;
  claimed_by: string | null;
  created_at: Date;
  updated_at: Date;
  sent_at: Date | null;
}

/** The public view of a job (GET /api/v1/mail/jobs/<id>, admin panel). No bodies. */
export interface JobView {
  job_id: string;
  state: JobState;
  sync: boolean;
  recipient_count: number;
  template: string | null;
  subject: string;
  message_id: string;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  next_attempt_at: string | null;
  created_at: string;
  updated_at: string;
  sent_at: string | null;
}

export function viewOf(j: JobRow): JobView {
  return {
    job_id: j.id,
    state: j.state,
    sync: j.sync,
    recipient_count: j.recipients.length,
    template: j.template,
    subject: j.subject,
    message_id: j.message_id,
    attempts: j.attempts,
    max_attempts: j.max_attempts,
    last_error: j.last_error,
    next_attempt_at: j.state === 'queued' || j.state === 'failed' ? j.run_at.toISOString() : null,
    created_at: j.created_at.toISOString(),
    updated_at: j.updated_at.toISOString(),
    sent_at: j.sent_at ? j.sent_at.toISOString() : null,
  };
}

export interface NewJob {
  id: string;
  keyId: string | null;
  mail: RenderedMail;
  messageId: string;
  maxAttempts: number;
  /** Sync sends are inserted already `sending`, leased to the request that sends them. */
  sync?: { leaseMs: number; worker: string };
}

/** Insert a job; with `notifyChannel`, NOTIFY it in the same statement (delivered at commit). */
export async function insertJob(q: Queryable, j: NewJob, notifyChannel?: string): Promise<void> {
  const insert = `INSERT INTO basalt.mail_jobs (id, key_id, state, sync, recipients, subject, text, html, template, message_id, max_attempts, attempts, lease_until, claimed_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now() + ($13::int * interval '1 millisecond'), $14)`;
  await q.query(
    notifyChannel ? `WITH job AS (${insert} RETURNING id) SELECT pg_notify($15, '') FROM job` : insert,
    [
      j.id, j.keyId, j.sync ? 'sending' : 'queued', !!j.sync, j.mail.to, j.mail.subject, j.mail.text ?? null, j.mail.html ?? null,
      j.mail.template ?? null, j.messageId, j.maxAttempts, j.sync ? 1 : 0, j.sync ? j.sync.leaseMs : null, j.sync?.worker ?? null,
      ...(notifyChannel ? [notifyChannel] : []),
    ],
  );
}

/**
 * Claim up to `n` due jobs for `worker`: queued or failed jobs whose time has come,
 * and queued jobs still `sending` under an expired lease (their instance died).
 * Sync jobs are never resent by the queue: their caller was told the outcome.
 * `exclude`: jobs this instance still holds (sending or about to): never claimed twice by
 * the same worker, even if their lease could not be renewed in time.
 */
export async function claimJobs(q: Queryable, worker: string, n: number, leaseMs: number, exclude: string[] = []): Promise<JobRow[]> {
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
export async function markSentMany(q: Queryable, worker: string, sent: { id: string; note: string | null }[]): Promise<void> {
  if (!sent.length) return;
  await q.query(
    `UPDATE basalt.mail_jobs j SET state = 'sent', sent_at = now(), lease_until = NULL, last_error = v.note, updated_at = now()
       FROM unnest($1::uuid[], $2::text[]) AS v(id, note)
      WHERE j.id = v.id AND j.claimed_by = $3 AND j.state = 'sending'`,
    [sent.map((s) => s.id), sent.map((s) => s.note), worker],
  );
}

/** An attempt failed: retry at `retryAt`, or dead when attempts are used up or the refusal is permanent. */
export async function markFailed(q: Queryable, id: string, worker: string, error: string, dead: boolean, retryInMs: number): Promise<JobState> {
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

export async function getJob(q: Queryable, id: string): Promise<JobRow | undefined> {
  if (!UUID.test(id)) return undefined;
  return (await q.query<JobRow>('SELECT * FROM basalt.mail_jobs WHERE id = $1', [id])).rows[0];
}

export interface JobFilter {
  state?: JobState;
  keyId?: string;
  limit?: number;
  offset?: number;
}

export async function listJobs(q: Queryable, f: JobFilter = {}): Promise<{ jobs: JobView[]; total: number }> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.state) where.push(`state = $${params.push(f.state)}`);
  if (f.keyId) where.push(`key_id = $${params.push(f.keyId)}`);
  const w = where.length ? 'WHERE ' + where.join(' AND ') : '';
  const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
  const offset = Math.max(f.offset ?? 0, 0);
  const total = Number((await q.query<{ n: string }>(`SELECT count(*) AS n FROM basalt.mail_jobs ${w}`, params)).rows[0]!.n);
  const page = [...params, limit, offset];
  const { rows } = await q.query<JobRow>(`SELECT * FROM basalt.mail_jobs ${w} ORDER BY created_at DESC LIMIT $${page.length - 1} OFFSET $${page.length}`, page);
  return { jobs: rows.map(viewOf), total };
}

/** Counts per state (dashboard, metrics); with `since`, of jobs created since then. */
export async function countByState(q: Queryable, since?: Date): Promise<Record<JobState, number>> {
  const out: Record<JobState, number> = { queued: 0, sending: 0, sent: 0, failed: 0, dead: 0, cancelled: 0 };
  const { rows } = since
    ? await q.query<{ state: JobState; n: string }>('SELECT state, count(*) AS n FROM basalt.mail_jobs WHERE created_at >= $1 GROUP BY state', [since])
    : await q.query<{ state: JobState; n: string }>('SELECT state, count(*) AS n FROM basalt.mail_jobs GROUP BY state');
  for (const r of rows) out[r.state] = Number(r.n);
  return out;
}

/** Put a dead or failed job back in the queue with a fresh set of attempts (admin action). */
export async function retryJob(q: Queryable, id: string): Promise<boolean> {
  if (!UUID.test(id)) return false;
  const r = await q.query(
    `UPDATE basalt.mail_jobs SET state = 'queued', attempts = 0, run_at = now(), lease_until = NULL, claimed_by = NULL, updated_at = now()
      WHERE id = $1 AND state IN ('dead', 'failed')`,
    [id],
  );
  return r.rowCount > 0;
}

/** Take a queued job out of the queue before any attempt (admin action). False when it is not queued. */
export async function cancelJob(q: Queryable, id: string): Promise<boolean> {
  if (!UUID.test(id)) return false;
  const r = await q.query(`UPDATE basalt.mail_jobs SET state = 'cancelled', run_at = now(), updated_at = now() WHERE id = $1 AND state = 'queued'`, [id]);
  return r.rowCount > 0;
}

/** What the admin panel filters jobs by; newest first, paged by a cursor. */
export interface JobSearch {
  state?: JobState;
  /** Jobs with this address among their recipients (exact, case-insensitive). */
  recipient?: string;
  since?: Date;
  until?: Date;
  limit?: number;
  /** Cursor from the previous page: `<created_at ISO>|<id>`. */
  before?: string;
}

/** Jobs newest first (whole rows: the admin view shows recipients), and the cursor of the next page. */
export async function searchJobs(q: Queryable, f: JobSearch): Promise<{ rows: JobRow[]; nextCursor: string | null }> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.state) where.push(`state = $${params.push(f.state)}`);
  if (f.recipient) where.push(`lower($${params.push(f.recipient)}) = ANY (SELECT lower(r) FROM unnest(recipients) AS r)`);
  if (f.since) where.push(`created_at >= $${params.push(f.since)}`);
  if (f.until) where.push(`created_at < $${params.push(f.until)}`);
  if (f.before) {
    const [at, id] = f.before.split('|');
    const when = new Date(at ?? '');
    if (!Number.isNaN(when.getTime()) && id && UUID.test(id)) where.push(`(created_at, id) < ($${params.push(when)}::timestamptz, $${params.push(id)}::uuid)`);
  }
  const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
  const { rows } = await q.query<JobRow>(
    `SELECT * FROM basalt.mail_jobs ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY created_at DESC, id DESC LIMIT $${params.push(limit + 1)}`,
    params,
  );
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const last = page[page.length - 1];
  return { rows: page, nextCursor: more && last ? `${last.created_at.toISOString()}|${last.id}` : null };
}

/** Delete finished jobs older than the retention, and expired idempotency records. */
export async function purge(q: Queryable, retentionDays: number): Promise<{ jobs: number; idempotency: number }> {
  const jobs = await q.query(
    `DELETE FROM basalt.mail_jobs WHERE state IN ('sent', 'dead', 'cancelled') AND updated_at < now() - ($1::int * interval '1 day')`,
    [retentionDays],
  );
  const idem = await q.query('DELETE FROM basalt.mail_idempotency WHERE expires_at < now()');
  return { jobs: jobs.rowCount, idempotency: idem.rowCount };
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
