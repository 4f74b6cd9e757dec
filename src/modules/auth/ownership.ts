/**
 * Account ownership (docs/auth.md, Account ownership): whoever proves the mailbox owns the
 * account. Until an address is verified, anyone could have registered it — an attacker
 * who signed up with the victim's address and a password they know, or linked a provider
 * account to it — so the FIRST proof of the mailbox (an e-mail code, a reset link, the
 * verification link, a provider vouching for the address) hands the account over: what
 * the earlier holder set up stops working. Every verifying path calls `mailboxProven`, in
 * the transaction that verifies; the caller's own new session (made after it) survives.
 */
import type { Queryable } from '../../db/engine';
import type { SessionStore } from './sessions';
import { removeTotp } from './totp';
import { userById, type UserRow } from './users';

const COLUMNS = 'id, email, password_hash, email_verified_at, disabled_at, created_at';

/**
 * Mark the address of `userId` verified, inside the caller's transaction. When it was not
 * verified before (the first proof), also: clear the password (set before the proof),
 * end every session (refresh tokens refused, access tokens refused at once on every
 * instance, at commit), unlink the identities linked while unverified, turn off a second
 * factor, and drop the half-done steps of the earlier holder (sign-ins waiting for their
 * exchange code or second factor, linking flows and confirmations). `first` says whether
 * that happened. undefined when there is no such user.
 */
export async function mailboxProven(
  tx: Queryable,
  sessions: SessionStore,
  userId: string,
): Promise<{ user: UserRow; first: boolean } | undefined> {
  // One statement decides "first": of two proofs racing, the row lock lets exactly one see NULL.
  const { rows } = await tx.query<UserRow>(
    `UPDATE basalt.users SET email_verified_at = now(), password_hash = NULL, updated_at = now()
      WHERE id = $1 AND email_verified_at IS NULL RETURNING ${COLUMNS}`,
    [userId],
  );
  const user = rows[0];
  if (!user) {
    const row = await userById(tx, userId);
    return row && { user: row, first: false };
  }
  await tx.query('DELETE FROM basalt.auth_identities WHERE user_id = $1 AND linked_unverified', [userId]);
  await removeTotp(tx, userId);
  for (const table of ['auth_exchange_codes', 'auth_mfa_challenges', 'auth_link_confirmations'])
    await tx.query(`DELETE FROM basalt.${table} WHERE user_id = $1`, [userId]);
  await tx.query('DELETE FROM basalt.auth_oauth_flows WHERE link_user_id = $1', [userId]);
  await sessions.revokeUser(userId, 'mailbox_proven', undefined, tx);
  return { user, first: true };
}
