/**
 * One-time e-mail codes (docs/auth.md, E-mail codes): six digits, valid 10 minutes, one
 * live code per address (a new request replaces it), burnt by the fifth wrong try.
 *
 * Six digits are a million values, so a plain hash would fall to a brute force from a
 * leaked table in a second: the code is kept as an HMAC under a key of this installation
 * (`basalt.secrets`), bound to the address.
 */
import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';
import type { Queryable, Db } from '../../db/engine';

export const EMAIL_CODE_SECONDS = 10 * 60;
/** Wrong tries a code survives; this one more burns it. */
export const EMAIL_CODE_TRIES = 5;

const digest = (key: string, email: string, code: string) =>
  createHmac('sha256', key).update(`${email}\n${code}`).digest();

/** A new code for `email`, replacing any earlier one; returns it (to be mailed). */
export async function issueEmailCode(db: Queryable, key: string, email: string): Promise<string> {
  const code = randomInt(0, 1_000_000).toString().padStart(6, '0');
  await db.query(
    `INSERT INTO basalt.auth_email_codes (email, code_hash, attempts, expires_at)
     VALUES ($1, $2, 0, now() + make_interval(secs => $3))
     ON CONFLICT (email) DO UPDATE SET code_hash = EXCLUDED.code_hash, attempts = 0, expires_at = EXCLUDED.expires_at`,
    [email, digest(key, email, code), EMAIL_CODE_SECONDS],
  );
  return code;
}

/**
 * Spend the code of `email` when `code` is it. A wrong code counts a try; the fifth wrong
 * one deletes the code. Under a row lock, so concurrent tries count one by one and a
 * right code is spent once.
 */
export async function useEmailCode(db: Db, key: string, email: string, code: string): Promise<boolean> {
  const presented = digest(key, email, /^\d{6}$/.test(code) ? code : 'not-a-code');
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ code_hash: Uint8Array; attempts: number }>(
      'SELECT code_hash, attempts FROM basalt.auth_email_codes WHERE email = $1 AND expires_at > now() FOR UPDATE',
      [email],
    );
    const row = rows[0];
    if (!row) return false;
    if (row.code_hash.length === presented.length && timingSafeEqual(row.code_hash, presented)) {
      await tx.query('DELETE FROM basalt.auth_email_codes WHERE email = $1', [email]);
      return true;
    }
    if (row.attempts + 1 >= EMAIL_CODE_TRIES)
      await tx.query('DELETE FROM basalt.auth_email_codes WHERE email = $1', [email]);
    else await tx.query('UPDATE basalt.auth_email_codes SET attempts = attempts + 1 WHERE email = $1', [email]);
    return false;
  });
}

/** Drop expired codes (housekeeping). */
export async function pruneEmailCodes(db: Queryable): Promise<void> {
  await db.query('DELETE FROM basalt.auth_email_codes WHERE expires_at < now()');
}
