/**
 * The `basalt.admins` table: administrators, their own accounts (never site users).
 * Statements take a Queryable so a change runs in the transaction of its audit row.
 */
import type { Queryable } from '../../db/engine';

export interface AdminRow {
  id: string;
  email: string;
  password_hash: string;
  created_at: Date;
  last_login_at: Date | null;
}

/** What the API and the CLI show of an administrator (docs/admin-api.md: admin). */
export interface AdminView {
  id: string;
  email: string;
  created_at: Date;
  last_login_at: Date | null;
}

const COLUMNS = 'id, email, password_hash, created_at, last_login_at';

/**
 * Serializes the changes that must see every administrator at once: the last one is
 * never deleted, and two people racing a setup link (or two links of two instances)
 * make one administrator.
 */
export const ADMINS_LOCK = 0x6261_6164; // "baad"

export function adminView(r: AdminRow): AdminView {
  return { id: r.id, email: r.email, created_at: r.created_at, last_login_at: r.last_login_at };
}

export async function adminByEmail(q: Queryable, email: string): Promise<AdminRow | undefined> {
  return (await q.query<AdminRow>(`SELECT ${COLUMNS} FROM basalt.admins WHERE email = $1`, [email])).rows[0];
}

export async function adminById(q: Queryable, id: string): Promise<AdminRow | undefined> {
  return (await q.query<AdminRow>(`SELECT ${COLUMNS} FROM basalt.admins WHERE id = $1`, [id])).rows[0];
}

export async function listAdmins(q: Queryable): Promise<AdminView[]> {
  return (await q.query<AdminRow>(`SELECT ${COLUMNS} FROM basalt.admins ORDER BY created_at, email`)).rows.map(
    adminView,
  );
}

export async function countAdmins(q: Queryable): Promise<number> {
  return (await q.query<{ n: number }>('SELECT count(*)::int AS n FROM basalt.admins')).rows[0]!.n;
}

/** Insert; undefined when the e-mail is taken. */
export async function insertAdmin(q: Queryable, email: string, passwordHash: string): Promise<AdminRow | undefined> {
  const { rows } = await q.query<AdminRow>(
    `INSERT INTO basalt.admins (email, password_hash) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING RETURNING ${COLUMNS}`,
    [email, passwordHash],
  );
  return rows[0];
}

export async function setAdminPassword(q: Queryable, id: string, passwordHash: string): Promise<void> {
  await q.query('UPDATE basalt.admins SET password_hash = $2, updated_at = now() WHERE id = $1', [id, passwordHash]);
}

export async function touchLogin(q: Queryable, id: string): Promise<AdminRow> {
  return (
    await q.query<AdminRow>(`UPDATE basalt.admins SET last_login_at = now() WHERE id = $1 RETURNING ${COLUMNS}`, [id])
  ).rows[0]!;
}

export async function deleteAdmin(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM basalt.admins WHERE id = $1', [id]);
}
