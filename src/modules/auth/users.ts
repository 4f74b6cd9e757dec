/**
 * The `basalt.users` table: lookups and the public shape of a user record.
 */
import type { Queryable } from '../../db/engine';

export interface UserRow {
  id: string;
  email: string;
  password_hash: string;
  email_verified_at: Date | null;
  disabled_at: Date | null;
  created_at: Date;
}

/** What clients see of a user (never the hash). */
export interface PublicUser {
  id: string;
  email: string;
  email_verified: boolean;
  email_verified_at: string | null;
  created_at: string;
}

const COLUMNS = 'id, email, password_hash, email_verified_at, disabled_at, created_at';

export function publicUser(u: UserRow): PublicUser {
  return {
    id: u.id,
    email: u.email,
    email_verified: u.email_verified_at !== null,
    email_verified_at: u.email_verified_at?.toISOString() ?? null,
    created_at: u.created_at.toISOString(),
  };
}

/** trim + lower-case: the one spelling an address is stored and looked up under. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

// Deliberately loose (one @, a dot in the domain, no spaces): the mailbox is proven by the verification mail.
const EMAIL = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;

export function emailProblem(normalized: string): string | undefined {
  if (!normalized) return 'is required';
  if (normalized.length > 254) return 'must be at most 254 characters';
  if (!EMAIL.test(normalized)) return 'must be an e-mail address like name@example.com';
  return undefined;
}

export async function userByEmail(q: Queryable, email: string): Promise<UserRow | undefined> {
  return (await q.query<UserRow>(`SELECT ${COLUMNS} FROM basalt.users WHERE email = $1`, [email])).rows[0];
}

export async function userById(q: Queryable, id: string): Promise<UserRow | undefined> {
  return (await q.query<UserRow>(`SELECT ${COLUMNS} FROM basalt.users WHERE id = $1`, [id])).rows[0];
}

export async function insertUser(q: Queryable, email: string, passwordHash: string): Promise<UserRow> {
  const { rows } = await q.query<UserRow>(`INSERT INTO basalt.users (email, password_hash) VALUES ($1, $2) RETURNING ${COLUMNS}`, [email, passwordHash]);
  return rows[0]!;
}

export async function setPasswordHash(q: Queryable, id: string, hash: string): Promise<void> {
  await q.query('UPDATE basalt.users SET password_hash = $2, updated_at = now() WHERE id = $1', [id, hash]);
}

export async function markVerified(q: Queryable, id: string): Promise<UserRow | undefined> {
  const { rows } = await q.query<UserRow>(
    `UPDATE basalt.users SET email_verified_at = coalesce(email_verified_at, now()), updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
    [id],
  );
  return rows[0];
}
