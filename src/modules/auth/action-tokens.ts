/**
 * Single-use tokens mailed to a user: password reset (1 hour) and e-mail
 * verification (24 hours). Hashed at rest; using one spends every other token of
 * the same purpose for that user, so an older mailed link cannot be replayed.
 */
import type { Queryable } from '../../db/engine';
import { newOpaqueToken, parseOpaqueToken, secretMatches } from './tokens';

export type Purpose = 'password_reset' | 'verify_email';

export const ACTION_TOKEN_SECONDS: Record<Purpose, number> = {
  password_reset: 60 * 60,
  verify_email: 24 * 60 * 60,
};

export async function issueActionToken(db: Queryable, userId: string, email: string, purpose: Purpose): Promise<string> {
  const t = newOpaqueToken();
  await db.query(
    `INSERT INTO basalt.auth_action_tokens (id, user_id, purpose, email, secret_hash, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))`,
    [t.id, userId, purpose, email, t.hash, ACTION_TOKEN_SECONDS[purpose]],
  );
  return t.token;
}

/**
 * Spend a token inside the caller's transaction. Returns the user it was issued to,
 * or undefined when it is unknown, of another purpose, expired, used, or was sent
 * to an address the account no longer has.
 */
export async function consumeActionToken(tx: Queryable, presented: string, purpose: Purpose): Promise<{ userId: string; email: string } | undefined> {
  const parsed = parseOpaqueToken(presented);
  if (!parsed) return undefined;
  const { rows } = await tx.query<{ user_id: string; email: string; secret_hash: Uint8Array; usable: boolean }>(
    `SELECT t.user_id, u.email, t.secret_hash, (t.used_at IS NULL AND t.expires_at > now() AND t.purpose = $2 AND t.email = u.email) AS usable
       FROM basalt.auth_action_tokens t JOIN basalt.users u ON u.id = t.user_id
      WHERE t.id = $1 FOR UPDATE OF t`,
    [parsed.id, purpose],
  );
  const row = rows[0];
  if (!row || !secretMatches(parsed.secret, row.secret_hash) || !row.usable) return undefined;
  await tx.query(`UPDATE basalt.auth_action_tokens SET used_at = now() WHERE user_id = $1 AND purpose = $2 AND used_at IS NULL`, [row.user_id, purpose]);
  return { userId: row.user_id, email: row.email };
}

/** Drop tokens that expired a day ago (housekeeping). */
export async function pruneActionTokens(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM basalt.auth_action_tokens WHERE expires_at < now() - interval '1 day'`);
}
