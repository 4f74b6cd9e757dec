/**
 * The job table in SQL (src/db/migrations/180_jobs_cron_hooks.sql, docs/extensions.md "Jobs"):
 * every statement that creates, claims, renews or settles a job. Claims use FOR UPDATE SKIP
 * LOCKED, so any number of instances share the table; every statement after a claim is
 * guarded by `claimed_by`, so an instance that lost a job (its lease passed and another took
 * it) never touches it again.
 */
import type { Queryable } from '../../db/engine';

/** NOTIFY channel of a new job (delivered at commit). */
export const JOBS_CHANNEL = 'basalt_jobs';

export type JobState = 'queued' | 'running' | 'succeeded' | 'dead' | 'cancelled';
export const JOB_STATES: JobState[] = ['queued', 'running', 'succeeded', 'dead', 'cancelled'];
export type JobKind = 'job' | 'cron' | 'hook';

export interface JobRow {
  id: string;
  extension: string;
  name: string;
  kind: JobKind;
  state: JobState;
  payload: unknown;
  idempotency_key: string | null;
  attempts: number;
  max_attempts: number;
  run_at: Date;
  lease_until: Date | null;
  claimed_by: string | null;
  errors: { attempt: number; at: string; error: string }[];
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

export interface NewJob {
  extension: string;
  name: string;
  kind: JobKind;
  payload: unknown;
  maxAttempts: number;
  idempotencyKey?: string;
  /** When it may run first (ms since the epoch); now when absent. */
  runAt?: number;
}

/**
 * Insert a job and NOTIFY in the same statement; with an idempotency key taken (per extension
 * and name) nothing is inserted and the first job's id is returned. On a transaction, the
 * job exists (and the NOTIFY goes out) only if it commits.
 */
export async function insertJob(q: Queryable, j: NewJob): Promise<string> {
  const params = [
    j.extension,
    j.name,
    j.kind,
    JSON.stringify(j.payload ?? null),
    j.maxAttempts,
    j.idempotencyKey ?? null,
    j.runAt === undefined ? null : new Date(j.runAt).toISOString(),
    JOBS_CHANNEL,
  ];
  const { rows } = await q.query<{ id: string }>(
    `WITH job AS (
       INSERT INTO basalt.jobs (extension, name, kind, payload, max_attempts, idempotency_key, run_at)
       VALUES ($1, $2, $3, $4::jsonb, $5, $6, coalesce($7::timestamptz, now()))
       ON CONFLICT (extension, name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING id)
     SELECT id, pg_notify($8, '') FROM job`,
    params,
  );
  if (rows[0]) return rows[0].id;
  // The key is taken: by a job committed before this statement (a new statement sees it).
  const first = await q.query<{ id: string }>(
    'SELECT id FROM basalt.jobs WHERE extension = $1 AND name = $2 AND idempotency_key = $3',
    [j.extension, j.name, j.idempotencyKey ?? null],
  );
  if (!first.rows[0])
    throw new Error(`jobs.enqueue('${j.name}'): the job holding idempotency key ${j.idempotencyKey} vanished`);
  return first.rows[0].id;
}

/**
 * Claim up to `n` due jobs of one definition for `worker`: queued jobs whose time has come,
 * and running jobs whose lease has passed (their runner died) with attempts left.
 */
export async function claimJobs(
  q: Queryable,
  def: { extension: string; name: string },
  worker: string,
  n: number,
  leaseMs: number,
): Promise<JobRow[]> {
  const { rows } = await q.query<JobRow>(
    `UPDATE basalt.jobs j
        SET state = 'running', attempts = j.attempts + 1, claimed_by = $3, updated_at = now(),
            lease_until = now() + ($5::int * interval '1 millisecond')
      WHERE j.id IN (
        SELECT id FROM basalt.jobs
         WHERE extension = $1 AND name = $2
           AND ((state = 'queued' AND run_at <= now())
             OR (state = 'running' AND lease_until < now() AND attempts < max_attempts))
         ORDER BY run_at
         LIMIT $4
         FOR UPDATE SKIP LOCKED)
      RETURNING j.*`,
    [def.extension, def.name, worker, n, leaseMs],
  );
  return rows;
}

/** Running jobs whose runner died during their last allowed attempt: dead, with that said. */
export async function buryAbandoned(q: Queryable): Promise<number> {
  const r = await q.query(
    `UPDATE basalt.jobs
        SET state = 'dead', lease_until = NULL, claimed_by = NULL, updated_at = now(), finished_at = now(),
            errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempts, 'at', now(),
                       'error', 'the instance running it stopped before it ended'))
      WHERE state = 'running' AND lease_until < now() AND attempts >= max_attempts`,
  );
  return r.rowCount;
}

/** Embedded engine only: one process owns the database, so a job `running` at start is an orphan. */
export async function requeueOrphans(q: Queryable): Promise<void> {
  await q.query(
    `UPDATE basalt.jobs SET lease_until = now() - interval '1 second', updated_at = now() WHERE state = 'running'`,
  );
}

/** Push the leases of jobs this worker holds; returns the ids still ours. */
export async function renewLeases(q: Queryable, ids: string[], worker: string, leaseMs: number): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const { rows } = await q.query<{ id: string }>(
    `UPDATE basalt.jobs SET lease_until = now() + ($3::int * interval '1 millisecond')
      WHERE id = ANY($1::uuid[]) AND claimed_by = $2 AND state = 'running'
      RETURNING id`,
    [ids, worker, leaseMs],
  );
  return new Set(rows.map((r) => r.id));
}

export async function markSucceeded(q: Queryable, id: string, worker: string): Promise<void> {
  await q.query(
    `UPDATE basalt.jobs SET state = 'succeeded', lease_until = NULL, updated_at = now(), finished_at = now()
      WHERE id = $1 AND claimed_by = $2 AND state = 'running'`,
    [id, worker],
  );
}

/** An attempt failed: its error kept; queued again after `retryInMs`, or dead when attempts are used up. */
export async function markFailed(
  q: Queryable,
  id: string,
  worker: string,
  error: string,
  retryInMs: number,
): Promise<JobState | undefined> {
  const { rows } = await q.query<{ state: JobState }>(
    `UPDATE basalt.jobs
        SET state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
            errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempts, 'at', now(), 'error', $3::text)),
            run_at = now() + ($4::int * interval '1 millisecond'),
            finished_at = CASE WHEN attempts >= max_attempts THEN now() END,
            lease_until = NULL, claimed_by = NULL, updated_at = now()
      WHERE id = $1 AND claimed_by = $2 AND state = 'running'
      RETURNING state`,
    [id, worker, error.slice(0, 2000), Math.round(retryInMs)],
  );
  return rows[0]?.state;
}

/** Give running jobs back at shutdown: the attempt does not count. */
export async function releaseJobs(q: Queryable, ids: string[], worker: string): Promise<void> {
  if (!ids.length) return;
  await q.query(
    `UPDATE basalt.jobs SET state = 'queued', attempts = greatest(attempts - 1, 0), lease_until = NULL,
            claimed_by = NULL, run_at = now(), updated_at = now()
      WHERE id = ANY($1::uuid[]) AND claimed_by = $2 AND state = 'running'`,
    [ids, worker],
  );
}

/** A dead (or cancelled) job queued again with a fresh set of attempts; its errors stay. */
export async function retryJob(q: Queryable, id: string): Promise<JobRow | undefined> {
  const { rows } = await q.query<JobRow>(
    `UPDATE basalt.jobs SET state = 'queued', attempts = 0, run_at = now(), finished_at = NULL, updated_at = now()
      WHERE id = $1 AND state IN ('dead', 'cancelled')
      RETURNING *`,
    [id],
  );
  if (rows[0]) await q.query('SELECT pg_notify($1, $2)', [JOBS_CHANNEL, '']);
  return rows[0];
}

/** A queued job cancelled (never a running one: its handler may be under way). */
export async function cancelJob(q: Queryable, id: string): Promise<JobRow | undefined> {
  const { rows } = await q.query<JobRow>(
    `UPDATE basalt.jobs SET state = 'cancelled', finished_at = now(), updated_at = now()
      WHERE id = $1 AND state = 'queued'
      RETURNING *`,
    [id],
  );
  return rows[0];
}

export async function getJob(q: Queryable, id: string): Promise<JobRow | undefined> {
  const { rows } = await q.query<JobRow>('SELECT * FROM basalt.jobs WHERE id = $1', [id]);
  return rows[0];
}

export interface JobFilter {
  extension?: string;
  name?: string;
  state?: JobState;
  limit: number;
}

export async function listJobs(q: Queryable, f: JobFilter): Promise<JobRow[]> {
  const { rows } = await q.query<JobRow>(
    `SELECT * FROM basalt.jobs
      WHERE ($1::text IS NULL OR extension = $1) AND ($2::text IS NULL OR name = $2) AND ($3::text IS NULL OR state = $3)
      ORDER BY created_at DESC, id LIMIT $4`,
    [f.extension ?? null, f.name ?? null, f.state ?? null, f.limit],
  );
  return rows;
}

/** Jobs by state (every state present, 0 when none): the /metrics gauge. */
export async function countByState(q: Queryable): Promise<Record<JobState, number>> {
  const { rows } = await q.query<{ state: JobState; n: string }>(
    'SELECT state, count(*) AS n FROM basalt.jobs GROUP BY state',
  );
  const out = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
  for (const r of rows) out[r.state] = Number(r.n);
  return out;
}

/**
 * Delete up to `batch` jobs that ended more than `days` ago, and cron slot records as old;
 * returns how many jobs went (callers repeat while a whole batch went).
 */
export async function purgeEnded(q: Queryable, days: number, batch: number): Promise<number> {
  await q.query(
    `DELETE FROM basalt.cron_runs WHERE (extension, name, slot) IN (
       SELECT extension, name, slot FROM basalt.cron_runs WHERE slot < now() - make_interval(days => $1) LIMIT $2)`,
    [days, batch],
  );
  const r = await q.query(
    `DELETE FROM basalt.jobs WHERE id IN (
       SELECT id FROM basalt.jobs
        WHERE state IN ('succeeded', 'dead', 'cancelled') AND finished_at < now() - make_interval(days => $1)
        LIMIT $2)`,
    [days, batch],
  );
  return r.rowCount;
}
