/**
 * Administrator sessions in `basalt.admin_sessions` (docs/admin-api.md §Sessions and
 * CSRF). The cookie holds 32 random bytes; the table holds their SHA-256, so any
 * instance on the database can check a cookie and a database leak yields none.
 *
 * Every request looks the session up (no cache): an ended session stops at once on
 * every instance. The idle and absolute lifetimes are live settings applied in the
 * lookup. `last_seen_at` is written behind: at most once per `touchAfterSeconds` (a
 * minute, or a quarter of the idle limit when that is shorter), so a use that was not
 * written is at most that old; the idle check allows for it, and an active session is
 * never ended early (docs/admin-api.md §Sessions and CSRF).
 */
import type { Queryable } from '../../db/engine';
import { sha256 } from '../auth/tokens';
import { hashOfPresented, newSecretToken } from './secret-token';

export interface SessionLifetimes {
  idleMinutes: number;
  maxHours: number;
}

export interface LiveSession {
  id: string;
  adminId: string;
  email: string;
  createdAt: Date;
  lastLoginAt: Date | null;
  /** The token the client must echo in X-CSRF-Token on state-changing requests. */
  csrfToken: string;
}

/**
 * The write-behind bound: `last_seen_at` is rewritten once it is older than this. Uses in
 * between are not written, so the true last use is at most this much later than the stored one.
 */
export function touchAfterSeconds(life: SessionLifetimes): number {
  return Math.max(1, Math.min(60, Math.floor((life.idleMinutes * 60) / 4)));
}

/**
 * The CSRF token is derived from the cookie's secret, so it is never stored: the
 * server recomputes it from the cookie, and only the session's owner (the page that
 * received it from login or /auth/me) knows it.
 */
export function csrfTokenOf(cookieToken: string): string {
  return Buffer.from(sha256('basalt-admin-csrf:' + cookieToken)).toString('base64url');
}

/** Start a session (inside the caller's transaction); returns the cookie token and its session id. */
export async function createSession(
  q: Queryable,
  adminId: string,
  meta: { ip: string; userAgent: string | null },
): Promise<{ token: string; id: string }> {
  const t = newSecretToken();
  const { rows } = await q.query<{ id: string }>(
    'INSERT INTO basalt.admin_sessions (token_hash, admin_id, ip, user_agent) VALUES ($1, $2, $3, $4) RETURNING id',
    [t.hash, adminId, meta.ip, meta.userAgent?.slice(0, 512) ?? null],
  );
  return { token: t.token, id: rows[0]!.id };
}

/** The live session of a cookie, or undefined (unknown, forged, idle too long or too old). */
export async function findSession(
  q: Queryable,
  cookieToken: string | undefined,
  life: SessionLifetimes,
): Promise<LiveSession | undefined> {
  const hash = hashOfPresented(cookieToken);
  if (!hash) return undefined;
  const { rows } = await q.query<{
    id: string;
    admin_id: string;
    email: string;
    created_at: Date;
    last_login_at: Date | null;
    stale: boolean;
  }>(
    `SELECT s.id, s.admin_id, a.email, a.created_at, a.last_login_at,
            s.last_seen_at < now() - make_interval(secs => $4::int) AS stale
       FROM basalt.admin_sessions s JOIN basalt.admins a ON a.id = s.admin_id
      WHERE s.token_hash = $1
        AND s.last_seen_at > now() - make_interval(mins => $2::int, secs => $4::int)
        AND s.created_at > now() - make_interval(hours => $3::int)`,
    [hash, life.idleMinutes, life.maxHours, touchAfterSeconds(life)],
  );
  const r = rows[0];
  if (!r) return undefined;
  if (r.stale) await q.query('UPDATE basalt.admin_sessions SET last_seen_at = now() WHERE token_hash = $1', [hash]);
  return {
    id: r.id,
    adminId: r.admin_id,
    email: r.email,
    createdAt: r.created_at,
    lastLoginAt: r.last_login_at,
    csrfToken: csrfTokenOf(cookieToken!),
  };
}

export async function endSession(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM basalt.admin_sessions WHERE id = $1', [id]);
}

/** End every session of an administrator, but `keep` (the one changing its password). */
export async function endAdminSessions(q: Queryable, adminId: string, keep?: string): Promise<number> {
  const { rowCount } = await q.query(
    'DELETE FROM basalt.admin_sessions WHERE admin_id = $1 AND ($2::uuid IS NULL OR id <> $2::uuid)',
    [adminId, keep ?? null],
  );
  return rowCount;
}

/** Drop sessions past either lifetime (housekeeping). */
export async function pruneSessions(q: Queryable, life: SessionLifetimes): Promise<void> {
  await q.query(
    `DELETE FROM basalt.admin_sessions WHERE last_seen_at < now() - make_interval(mins => $1::int, secs => $3::int) OR created_at < now() - make_interval(hours => $2::int)`,
    [life.idleMinutes, life.maxHours, touchAfterSeconds(life)],
  );
}
