/**
 * Administrator sign-in lockout (docs/admin.md, "Sign-in and lockout"). Failures are
 * counted per (account, source address): an outsider who types wrong passwords locks
 * only their own address out of that account, never the administrator sitting
 * elsewhere. A backstop counts every source together with a much higher threshold, so
 * guessing from many addresses still ends; only it locks the account for everyone,
 * and `basalt admin unlock` (or `admin passwd`) lifts it.
 *
 * The counters are Public Auth's lockout table (one implementation, ../auth/rate-limit.ts)
 * under admin-only names: `admin:<email>` for the backstop (the name locks had before),
 * `admin_src:["<email>","<ip>"]` per source — JSON, so no e-mail can forge another's prefix.
 */
import type { Queryable } from '../../db/engine';
import { clearFailures, lockedFor, recordFailure } from '../auth/rate-limit';

export interface LockoutLimits {
  /** Failures from one source within the window that lock that source out (auth.lockout_threshold). */
  perSource: number;
  /** Failures from all sources within the window that lock the account (admin.lockout_backstop_threshold). */
  backstop: number;
  windowSeconds: number;
}

/** One address failing to sign in as an administrator. */
export interface FailingSource {
  ip: string;
  failures: number;
  window_start: Date;
  locked_until: Date | null;
}

/** What the admin API and `admin list` show of an account's lock. */
export interface LockState {
  /** The backstop lock: nobody signs in until then. */
  locked_until: Date | null;
  /** Failures counted by the backstop in its current window. */
  failures: number;
  /** Addresses with failures in their window, most recent first. */
  sources: FailingSource[];
}

const accountKey = (email: string) => `admin:${email}`;
const sourcePrefix = (email: string) => `admin_src:[${JSON.stringify(email)},`;
const sourceKey = (email: string, ip: string) => `admin_src:${JSON.stringify([email, ip])}`;

/** Seconds this source (or, past the backstop, everyone) stays locked out of `email`; 0 when free. */
export async function lockedOut(db: Queryable, email: string, ip: string): Promise<number> {
  return Math.max(await lockedFor(db, sourceKey(email, ip)), await lockedFor(db, accountKey(email)));
}

/** Count a failure of `ip` on `email`; says which lock it set, if any. */
export async function recordAdminFailure(
  db: Queryable,
  email: string,
  ip: string,
  limits: LockoutLimits,
): Promise<{ sourceLocked: boolean; accountLocked: boolean }> {
  const sourceLocked = await recordFailure(db, sourceKey(email, ip), limits.perSource, limits.windowSeconds);
  const accountLocked = await recordFailure(db, accountKey(email), limits.backstop, limits.windowSeconds);
  return { sourceLocked, accountLocked };
}

/** A successful sign-in from `ip`: that source starts afresh (the backstop keeps counting others). */
export async function clearSource(db: Queryable, email: string, ip: string): Promise<void> {
  await clearFailures(db, sourceKey(email, ip));
}

/** Lift every lock of `email` and forget its failures (`admin unlock`, `admin passwd`); returns the rows cleared. */
export async function unlockAccount(db: Queryable, email: string): Promise<number> {
  const prefix = sourcePrefix(email);
  const { rowCount } = await db.query(
    'DELETE FROM basalt.auth_login_failures WHERE email = $1 OR left(email, length($2)) = $2',
    [accountKey(email), prefix],
  );
  return rowCount;
}

/** The lock state of each of `emails`. Counters whose window ended and that hold no lock are left out. */
export async function lockStates(
  db: Queryable,
  emails: string[],
  windowSeconds: number,
): Promise<Map<string, LockState>> {
  const out = new Map<string, LockState>();
  for (const e of emails) out.set(e, { locked_until: null, failures: 0, sources: [] });
  if (!emails.length) return out;
  const { rows } = await db.query<{ email: string; window_start: Date; failures: number; locked_until: Date | null }>(
    `SELECT f.email, f.window_start, f.failures, CASE WHEN f.locked_until > now() THEN f.locked_until END AS locked_until
       FROM basalt.auth_login_failures f
      WHERE (f.email = ANY ($1::text[]) OR EXISTS (SELECT 1 FROM unnest($3::text[]) p WHERE left(f.email, length(p)) = p))
        AND (f.locked_until > now() OR f.window_start > now() - make_interval(secs => $2))
      ORDER BY f.window_start DESC`,
    [emails.map(accountKey), windowSeconds, emails.map(sourcePrefix)],
  );
  for (const r of rows) {
    if (r.email.startsWith('admin:')) {
      const s = out.get(r.email.slice('admin:'.length));
      if (s) Object.assign(s, { locked_until: r.locked_until, failures: r.failures });
      continue;
    }
    let pair: unknown;
    try {
      pair = JSON.parse(r.email.slice('admin_src:'.length));
    } catch {
      continue;
    }
    if (!Array.isArray(pair) || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') continue;
    out.get(pair[0])?.sources.push({
      ip: pair[1],
      failures: r.failures,
      window_start: r.window_start,
      locked_until: r.locked_until,
    });
  }
  return out;
}
