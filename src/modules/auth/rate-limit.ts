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
 * The two fixed-window counters: request buckets (rate limits) and failed logins per
 * address (lockout). Fixed names, never input: they are spliced into the one SQL below.
 */
const COUNTERS = {
  hits: { table: 'basalt.auth_rate_limits', key: 'bucket', count: 'hits' },
  failures: { table: 'basalt.auth_login_failures', key: 'email', count: 'failures' },
} as const;

/**
 * The one fixed-window counter: count one event for `key` in a window of `windowSeconds`
 * (a window that has ended starts afresh at 1). Returns the window's count so far and
 * the seconds until it resets (≥ 1).
 */
async function count(
  db: Queryable,
  counter: keyof typeof COUNTERS,
  key: string,
  windowSeconds: number,
): Promise<{ count: number; retryAfter: number }> {
  const { table, key: k, count: n } = COUNTERS[counter];
  const { rows } = await db.query<{ count: number; retry_after: number }>(
    `INSERT INTO ${table} AS c (${k}, window_start, ${n}) VALUES ($1, now(), 1)
     ON CONFLICT (${k}) DO UPDATE SET
       ${n} = CASE WHEN c.window_start <= now() - make_interval(secs => $2) THEN 1 ELSE c.${n} + 1 END,
       window_start = CASE WHEN c.window_start <= now() - make_interval(secs => $2) THEN now() ELSE c.window_start END
     RETURNING ${n} AS count, greatest(1, ceil(extract(epoch FROM c.window_start + make_interval(secs => $2) - now())))::int AS retry_after`,
    [key, windowSeconds],
  );
  const r = rows[0]!;
  return { count: r.count, retryAfter: r.retry_after };
}

/**
 * Count one hit in a fixed window of `windowSeconds` for `bucket`; refused once
 * the window holds more than `limit` hits.
 */
export async function hit(db: Queryable, bucket: string, limit: number, windowSeconds: number): Promise<Hit> {
  const r = await count(db, 'hits', bucket, windowSeconds);
  return { allowed: r.count <= limit, retryAfter: r.retryAfter };
}

/**
 * The bucket of a per-account limit: one account (address) from one client address, so
 * requests from elsewhere cannot use up the owner's allowance (login, `otp/verify`).
 */
export const accountFromBucket = (kind: string, email: string, ip: string): string =>
  `${kind}:${JSON.stringify([email, ip])}`;

/** What every client address's bucket of one account starts with (to reset them all). */
export const accountBucketsPrefix = (kind: string, email: string): string => `${kind}:[${JSON.stringify(email)},`;

/** The per-account limits kept per client address: `unlock` resets them all. */
export const ACCOUNT_LIMITS = ['login_account', 'otp_account'] as const;

/**
 * A limiter's check: count one hit against `perMinute` for `bucket`; past it, throw
 * `refused(retryAfter)` (each area's own 429 error).
 */
export async function limitPerMinute(
  db: Queryable,
  bucket: string,
  perMinute: number,
  refused: (retryAfter: number) => Error,
): Promise<void> {
  const r = await hit(db, bucket, perMinute, 60);
  if (!r.allowed) throw refused(r.retryAfter);
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
export async function recordFailure(
  db: Queryable,
  email: string,
  threshold: number,
  windowSeconds: number,
): Promise<boolean> {
  if ((await count(db, 'failures', email, windowSeconds)).count < threshold) return false;
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

/**
 * Forget the counters whose name starts with `prefix` (a password reset proves the mailbox,
 * an unlock is the operator's word: the owner may sign in at once); returns how many.
 */
export async function resetBuckets(db: Queryable, prefix: string): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM basalt.auth_rate_limits WHERE left(bucket, length($1)) = $1', [
    prefix,
  ]);
  return rowCount;
}

/** Drop counters whose window ended long ago (housekeeping). */
export async function pruneCounters(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM basalt.auth_rate_limits WHERE window_start < now() - interval '1 day'`);
  await db.query(
    `DELETE FROM basalt.auth_login_failures WHERE window_start < now() - interval '1 day' AND (locked_until IS NULL OR locked_until < now())`,
  );
}
