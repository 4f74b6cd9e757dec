/**
 * Site users as an administrator reads them (docs/admin-api.md §Users): search, detail,
 * live sessions and the count, through AuthService (`searchUsers`, `userDetail`,
 * `userSessions`, `countUsers`), so that only Public Auth reads its tables. Changes go
 * through the same service (setDisabled, deleteUser, unlock, session revocation).
 */
import { domainToASCII } from 'node:url';
import type { Queryable } from '../../db/engine';
import { isUuid } from '../../util/uuid';

export interface AdminUserView {
  id: string;
  email: string;
  email_verified_at: Date | null;
  disabled_at: Date | null;
  created_at: Date;
  last_login_at: Date | null;
  locked_until: Date | null;
}

export interface UserSessionView {
  id: string;
  created_at: Date;
  last_used_at: Date;
  expires_at: Date;
  ip: string | null;
  user_agent: string | null;
}

// Last sign-in = newest session; the lock is Public Auth's, keyed by the address.
const SELECT = `SELECT u.id, u.email, u.email_verified_at, u.disabled_at, u.created_at,
    (SELECT max(s.created_at) FROM basalt.auth_sessions s WHERE s.user_id = u.id) AS last_login_at,
    (SELECT f.locked_until FROM basalt.auth_login_failures f WHERE f.email = u.email AND f.locked_until > now()) AS locked_until
  FROM basalt.users u`;

/** Users whose e-mail contains `search` (case-insensitive), newest first, with the total of matches. */
export async function searchUsers(
  q: Queryable,
  f: { search?: string; limit?: number; offset?: number },
): Promise<{ users: AdminUserView[]; total: number }> {
  const term = f.search?.trim().toLowerCase();
  const like = (t: string) => `%${t.replace(/[\\%_]/g, '\\$&')}%`;
  const pattern = term ? like(term) : null;
  // Domains are stored in their xn-- form (users.ts normalizeEmail): a search with a whole Unicode
  // label (`bücher.example`, `a@bücher.example`) also looks for its xn-- form; part of a label cannot be.
  const ascii = term && /[^\x00-\x7f]/.test(term) ? domainToASCII(term.slice(term.lastIndexOf('@') + 1)) : '';
  const alt = ascii ? like(ascii) : pattern;
  const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
  const offset = Math.max(f.offset ?? 0, 0);
  const where = pattern ? 'WHERE (u.email LIKE $1 OR u.email LIKE $2)' : 'WHERE $1::text IS NULL AND $2::text IS NULL';
  const total = (await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM basalt.users u ${where}`, [pattern, alt]))
    .rows[0]!.n;
  const { rows } = await q.query<AdminUserView>(
    `${SELECT} ${where} ORDER BY u.created_at DESC, u.id LIMIT $3 OFFSET $4`,
    [pattern, alt, limit, offset],
  );
  return { users: rows, total };
}

export async function userDetail(q: Queryable, id: string): Promise<AdminUserView | undefined> {
  if (!isUuid(id)) return undefined;
  return (await q.query<AdminUserView>(`${SELECT} WHERE u.id = $1`, [id])).rows[0];
}

/** How many site users there are. */
export async function countUsers(q: Queryable): Promise<number> {
  return (await q.query<{ n: number }>('SELECT count(*)::int AS n FROM basalt.users')).rows[0]!.n;
}

/** The user's live sessions, newest first. */
export async function userSessions(q: Queryable, id: string): Promise<UserSessionView[]> {
  const { rows } = await q.query<UserSessionView>(
    `SELECT id, created_at, last_used_at, expires_at, ip, user_agent FROM basalt.auth_sessions
      WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now() ORDER BY created_at DESC LIMIT 100`,
    [id],
  );
  return rows;
}
