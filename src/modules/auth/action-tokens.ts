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

export async function issueActionToken(
  db: Queryable,
  userId: string,
  email: string,
  purpose: Purpose,
): Promise<string> {
  const t = newOpaqueToken();
  await db.query(
    `INSERT INTO basalt.auth_action_tokens (id, user_id, purpose, email, secret_hash, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))`,
    [t.id, userId, purpose, email, t.hash, ACTION_TOKEN_SECONDS[purpose]],
  );
  return t.token;
}

type Row = { user_id: string; email: string; secret_hash: Uint8Array; usable: boolean };

/** The token's row when the presented secret is genuine and the token is usable now. */
async function usableRow(q: Queryable, presented: string, purpose: Purpose, lock: boolean): Promise<Row | undefined> {
  const parsed = parseOpaqueToken(presented);
  if (!parsed) return undefined;
  const { rows } = await q.query<Row>(
    `SELECT t.user_id, u.email, t.secret_hash, (t.used_at IS NULL AND t.expires_at > now() AND t.purpose = $2 AND t.email = u.email) AS usable
       FROM basalt.auth_action_tokens t JOIN basalt.users u ON u.id = t.user_id
      WHERE t.id = $1${lock ? ' FOR UPDATE OF t' : ''}`,
    [parsed.id, purpose],
  );
  const row = rows[0];
  return row && secretMatches(parsed.secret, row.secret_hash) && row.usable ? row : undefined;
}

/**
 * The user of a token that could be spent right now (undefined: none), without spending
 * it. Lets a caller refuse a dead token before expensive work (hashing a new password);
 * the spend itself still happens in `consumeActionToken`, which re-checks under a row lock.
 */
export async function liveActionTokenUser(
  q: Queryable,
  presented: string,
  purpose: Purpose,
): Promise<string | undefined> {
  return (await usableRow(q, presented, purpose, false))?.user_id;
}

/**
 * Spend a token inside the caller's transaction. Returns the user it was issued to,
 * or undefined when it is unknown, of another purpose, expired, used, or was sent
 * to an address the account no longer has. The row lock makes two concurrent spends
 * of one token serialize: the second sees it used.
 */
export async function consumeActionToken(
  tx: Queryable,
  presented: string,
  purpose: Purpose,
): Promise<{ userId: string; email: string } | undefined> {
  const row = await usableRow(tx, presented, purpose, true);
  if (!row) return undefined;
  await tx.query(
    `UPDATE basalt.auth_action_tokens SET used_at = now() WHERE user_id = $1 AND purpose = $2 AND used_at IS NULL`,
    [row.user_id, purpose],
  );
  return { userId: row.user_id, email: row.email };
}

/** Drop tokens that expired a day ago (housekeeping). */
export async function pruneActionTokens(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM basalt.auth_action_tokens WHERE expires_at < now() - interval '1 day'`);
}
