/**
 * Sign-in lockout that an outsider cannot turn against the account's owner (docs/auth.md,
 * "Rate limits and lockout"; docs/admin.md, "Sign-in and lockout"). Failures are counted
 * per (account, source address): whoever types wrong passwords, codes or second factors
 * locks only their own address out of that account, never the owner signing in from
 * elsewhere. A backstop counts every source together with a much higher threshold, so
 * guessing from many addresses still ends; only it locks the account for everyone.
 *
 * One implementation for site users and administrators, on the counters of ./rate-limit.ts
 * under names of each kind: the backstop under the name locks always had (`<email>` for a
 * site user, `admin:<email>` for an administrator), a source under `user_src:` / `admin_src:`
 * followed by the JSON pair `["<email>","<ip>"]` — JSON, so no address can forge another's
 * prefix, and no address contains `:` or `"` (users.ts refuses both), so names never collide.
 */
import type { Queryable } from '../../db/engine';
import { clearFailures, lockedFor, recordFailure } from './rate-limit';

export interface LockoutLimits {
  /** Failures from one source within the window that lock that source out (auth.lockout_threshold). */
  perSource: number;
  /** Failures from all sources within the window that lock the account for everyone. */
  backstop: number;
  windowSeconds: number;
}

/** One address failing to sign in to an account. */
export interface FailingSource {
  ip: string;
  failures: number;
  window_start: Date;
  locked_until: Date | null;
}

/** What the admin API, `admin list` and the panel show of an account's lock. */
export interface LockState {
  /** The backstop lock: nobody signs in until then. */
  locked_until: Date | null;
  /** Failures counted by the backstop in its current window. */
  failures: number;
  /** Addresses with failures in their window, most recent first. */
  sources: FailingSource[];
}

export class AccountLockout {
  private readonly backstopPrefix: string;
  private readonly sourceTag: string;

  /** `user`: site users (Public Auth); `admin`: administrators. */
  constructor(kind: 'user' | 'admin') {
    this.backstopPrefix = kind === 'admin' ? 'admin:' : '';
    this.sourceTag = `${kind}_src:`;
  }

  private accountKey(email: string): string {
    return `${this.backstopPrefix}${email}`;
  }

  private sourcePrefix(email: string): string {
    return `${this.sourceTag}[${JSON.stringify(email)},`;
  }

  private sourceKey(email: string, ip: string): string {
    return `${this.sourceTag}${JSON.stringify([email, ip])}`;
  }

  /** Seconds this source (or, past the backstop, everyone) stays locked out of `email`; 0 when free. */
  async lockedOut(db: Queryable, email: string, ip: string): Promise<number> {
    return Math.max(await lockedFor(db, this.sourceKey(email, ip)), await lockedFor(db, this.accountKey(email)));
  }

  /** Count a failure of `ip` on `email`; says which lock it set, if any. */
  async recordFailure(
    db: Queryable,
    email: string,
    ip: string,
    limits: LockoutLimits,
  ): Promise<{ sourceLocked: boolean; accountLocked: boolean }> {
    const sourceLocked = await recordFailure(db, this.sourceKey(email, ip), limits.perSource, limits.windowSeconds);
    const accountLocked = await recordFailure(db, this.accountKey(email), limits.backstop, limits.windowSeconds);
    return { sourceLocked, accountLocked };
  }

  /** A completed sign-in from `ip`: that source starts afresh (the backstop keeps counting others). */
  async clearSource(db: Queryable, email: string, ip: string): Promise<void> {
    await clearFailures(db, this.sourceKey(email, ip));
  }

  /** Lift every lock of `email` and forget its failures (unlock, a new password); returns the rows cleared. */
  async unlock(db: Queryable, email: string): Promise<number> {
    const { rowCount } = await db.query(
      'DELETE FROM basalt.auth_login_failures WHERE email = $1 OR left(email, length($2)) = $2',
      [this.accountKey(email), this.sourcePrefix(email)],
    );
    return rowCount;
  }

  /** The lock state of each of `emails`. Counters whose window ended and that hold no lock are left out. */
  async states(db: Queryable, emails: string[], windowSeconds: number): Promise<Map<string, LockState>> {
    const out = new Map<string, LockState>();
    for (const e of emails) out.set(e, { locked_until: null, failures: 0, sources: [] });
    if (!emails.length) return out;
    const accounts = new Map(emails.map((e) => [this.accountKey(e), e]));
    const { rows } = await db.query<{ email: string; window_start: Date; failures: number; locked_until: Date | null }>(
      `SELECT f.email, f.window_start, f.failures, CASE WHEN f.locked_until > now() THEN f.locked_until END AS locked_until
         FROM basalt.auth_login_failures f
        WHERE (f.email = ANY ($1::text[]) OR EXISTS (SELECT 1 FROM unnest($3::text[]) p WHERE left(f.email, length(p)) = p))
          AND (f.locked_until > now() OR f.window_start > now() - make_interval(secs => $2))
        ORDER BY f.window_start DESC`,
      [[...accounts.keys()], windowSeconds, emails.map((e) => this.sourcePrefix(e))],
    );
    for (const r of rows) {
      const account = accounts.get(r.email);
      if (account !== undefined) {
        Object.assign(out.get(account)!, { locked_until: r.locked_until, failures: r.failures });
        continue;
      }
      let pair: unknown;
      try {
        pair = JSON.parse(r.email.slice(this.sourceTag.length));
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
}

/** Site users' lockout (Public Auth). */
export const userLockout = new AccountLockout('user');
/** Administrators' lockout (the admin panel's sign-in). */
export const adminLockout = new AccountLockout('admin');
