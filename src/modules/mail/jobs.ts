/**
 * The queue's rows (`basalt.mail_jobs`): their shape, the public view, and the reads and
 * administrator actions (retry, cancel). A job's life (docs/mail.md, "The queue"):
 *
 *   queued ──claim──▶ sending ──accepted──▶ sent
 *                        │
 *                        ├─temporary failure─▶ failed ──(run_at reached)──▶ claim again
 *                        └─last attempt / permanent refusal─▶ dead
 *   sending whose lease expired (instance died) ──▶ claimable again
 *   queued ──administrator cancels──▶ cancelled (never sent)
 *
 * Acceptance is in accept.ts, the transitions of a leased job in leases.ts, the delivery
 * worker in worker.ts, the purge of old rows in retention.ts.
 */
import type { Queryable } from '../../db/engine';
import type { JobView } from './model';

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
  /** The Idempotency-Key of the send; null without one, or once a later request took it over (docs/mail.md, "Idempotency"). */
  idem_key: string | null;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  /** Earlier rounds of attempts, oldest first, one per administrator retry. */
  history: { until: string; state: JobState; attempts: number; last_error: string | null }[];
  run_at: Date;
  lease_until: Date | null;
  claimed_by: string | null;
  created_at: Date;
  updated_at: Date;
  sent_at: Date | null;
}

/** The public view of a job: the `MailJob` schema of model.ts. */
export type { JobView };

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
  const total = Number(
    (await q.query<{ n: string }>(`SELECT count(*) AS n FROM basalt.mail_jobs ${w}`, params)).rows[0]!.n,
  );
  const page = [...params, limit, offset];
  const { rows } = await q.query<JobRow>(
    `SELECT * FROM basalt.mail_jobs ${w} ORDER BY created_at DESC LIMIT $${page.length - 1} OFFSET $${page.length}`,
    page,
  );
  return { jobs: rows.map(viewOf), total };
}

/** Counts per state (dashboard, metrics); with `since`, of jobs created since then. */
export async function countByState(q: Queryable, since?: Date): Promise<Record<JobState, number>> {
  const out: Record<JobState, number> = { queued: 0, sending: 0, sent: 0, failed: 0, dead: 0, cancelled: 0 };
  const { rows } = since
    ? await q.query<{ state: JobState; n: string }>(
        'SELECT state, count(*) AS n FROM basalt.mail_jobs WHERE created_at >= $1 GROUP BY state',
        [since],
      )
    : await q.query<{ state: JobState; n: string }>('SELECT state, count(*) AS n FROM basalt.mail_jobs GROUP BY state');
  for (const r of rows) out[r.state] = Number(r.n);
  return out;
}

/**
 * Put a dead or failed job back in the queue with a fresh set of attempts (admin action).
 * What came before (state, attempts, last error) is appended to `history`, never erased.
 */
export async function retryJob(q: Queryable, id: string): Promise<boolean> {
  if (!UUID.test(id)) return false;
  const r = await q.query(
    `UPDATE basalt.mail_jobs SET state = 'queued', attempts = 0, run_at = now(), lease_until = NULL, claimed_by = NULL, updated_at = now(),
            history = history || jsonb_build_array(jsonb_build_object(
              'until', now(), 'state', state, 'attempts', attempts, 'last_error', last_error))
      WHERE id = $1 AND state IN ('dead', 'failed')`,
    [id],
  );
  return r.rowCount > 0;
}

/** Take a queued job out of the queue before any attempt (admin action). False when it is not queued. */
export async function cancelJob(q: Queryable, id: string): Promise<boolean> {
  if (!UUID.test(id)) return false;
  const r = await q.query(
    `UPDATE basalt.mail_jobs SET state = 'cancelled', run_at = now(), updated_at = now() WHERE id = $1 AND state = 'queued'`,
    [id],
  );
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

/** A page cursor (`<created_at ISO>|<id>`, as `searchJobs` hands out), or undefined when it is not one. */
export function parseJobCursor(cursor: string): { at: Date; id: string } | undefined {
  const [at, id, ...rest] = cursor.split('|');
  const when = new Date(at ?? '');
  if (rest.length || !at || Number.isNaN(when.getTime()) || !id || !UUID.test(id)) return undefined;
  return { at: when, id };
}

/** Jobs newest first (whole rows: the admin view shows recipients), and the cursor of the next page. */
export async function searchJobs(q: Queryable, f: JobSearch): Promise<{ rows: JobRow[]; nextCursor: string | null }> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.state) where.push(`state = $${params.push(f.state)}`);
  if (f.recipient)
    where.push(`lower($${params.push(f.recipient)}) = ANY (SELECT lower(r) FROM unnest(recipients) AS r)`);
  if (f.since) where.push(`created_at >= $${params.push(f.since)}`);
  if (f.until) where.push(`created_at < $${params.push(f.until)}`);
  if (f.before) {
    const c = parseJobCursor(f.before);
    if (c) where.push(`(created_at, id) < ($${params.push(c.at)}::timestamptz, $${params.push(c.id)}::uuid)`);
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

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
