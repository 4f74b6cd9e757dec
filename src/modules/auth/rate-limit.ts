/**
 * Rate limits and lockout kept in the platform database, so every instance on one
 * database shares the counters and a restart forgets nothing. Each check is one
 * atomic upsert; time is the database's clock, the same for every instance.
 */
import type { Queryable } from '../../db/engine';

export interface Hit {
  allowed: boolean;
  /** Seconds until the window resets (≥ 1). */
  retryAfter: number;
}

/**
 * Count one hit in a fixed window of `windowSeconds` for `bucket`; refused once
 * the window holds more than `limit` hits.
 */
export async function hit(db: Queryable, bucket: string, limit: number, windowSeconds: number): Promise<Hit> {
  const { rows } = await db.query<{ hits: number; retry_after: number }>(
    `INSERT INTO basalt.auth_rate_limits AS r (bucket, window_start, hits) VALUES ($1, now(), 1)
     ON CONFLICT (bucket) DO UPDATE SET
       hits = CASE WHEN r.window_start <= now() - make_interval(secs => $2) THEN 1 ELSE r.hits + 1 END,
       window_start = CASE WHEN r.window_start <= now() - make_interval(secs => $2) THEN now() ELSE r.window_start END
     RETURNING hits, greatest(1, ceil(extract(epoch FROM r.window_start + make_interval(secs => $2) - now())))::int AS retry_after`,
    [bucket, windowSeconds],
  );
  const r = rows[0]!;
  return { allowed: r.hits <= limit, retryAfter: r.retry_after };
}

/** Seconds the address stays locked, or 0 when it is not locked. */
export async function lockedFor(db: Queryable, email: string): Promise<number> {
  const { rows } = await db.query<{ s: number }>(
    `SELECT greatest(1, ceil(extract(epoch FROM locked_until - now())))::int AS s
       FROM basalt.auth_login_failures WHERE email = $1 AND locked_until > now()`,
    [email],
  );
  return rows[0]?.s ?? 0;
}

/**
 * Record a failed login for an address (known or not). When failures within the
 * window reach `threshold`, lock the address for `windowSeconds` and start counting
 * afresh. Returns true when this failure locked it.
 */
export async function recordFailure(db: Queryable, email: string, threshold: number, windowSeconds: number): Promise<boolean> {
  const { rows } = await db.query<{ failures: number }>(
    `INSERT INTO basalt.auth_login_failures AS f (email, window_start, failures) VALUES ($1, now(), 1)
     ON CONFLICT (email) DO UPDATE SET
       failures = CASE WHEN f.window_start <= now() - make_interval(secs => $2) THEN 1 ELSE f.failures + 1 END,
       window_start = CASE WHEN f.window_start <= now() - make_interval(secs => $2) THEN now() ELSE f.window_start END
     RETURNING failures`,
    [email, windowSeconds],
  );
  if (rows[0]!.failures < threshold) return false;
  await db.query(
    `UPDATE basalt.auth_login_failures SET locked_until = now() + make_interval(secs => $2), failures = 0, window_start = now() WHERE email = $1`,
    [email, windowSeconds],
  );
  return true;
}

/** A successful login or a password reset clears the address's failures and lock. */
export async function clearFailures(db: Queryable, email: string): Promise<void> {
  await db.query('DELETE FROM basalt.auth_login_failures WHERE email = $1', [email]);
}

/** Forget a counter (a password reset proves the mailbox: its owner may log in at once). */
export async function resetBucket(db: Queryable, bucket: string): Promise<void> {
  await db.query('DELETE FROM basalt.auth_rate_limits WHERE bucket = $1', [bucket]);
}

/** Drop counters whose window ended long ago (housekeeping). */
export async function pruneCounters(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM basalt.auth_rate_limits WHERE window_start < now() - interval '1 day'`);
  await db.query(`DELETE FROM basalt.auth_login_failures WHERE window_start < now() - interval '1 day' AND (locked_until IS NULL OR locked_until < now())`);
}
