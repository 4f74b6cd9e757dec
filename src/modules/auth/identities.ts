/**
 * Provider identities linked to users, and the short single-use codes of the provider
 * flow: `exchange` (the callback's `#code=`, traded for tokens) and `link` (a signed-in
 * user's ticket to start linking). docs/auth.md, OAuth2 and OpenID Connect.
 */
import type { Queryable } from '../../db/engine';
import { newOpaqueToken, parseOpaqueToken, secretMatches } from './tokens';

/** Lifetime of exchange codes and link tickets. */
export const ONE_TIME_CODE_SECONDS = 60;

export interface Identity {
  id: string;
  provider: string;
  email: string | null;
  email_verified: boolean;
  created_at: string;
  last_used_at: string;
}

type IdentityRow = Omit<Identity, 'created_at' | 'last_used_at'> & {
  user_id: string;
  created_at: Date;
  last_used_at: Date;
};

const shown = (r: IdentityRow): Identity => ({
  id: r.id,
  provider: r.provider,
  email: r.email,
  email_verified: r.email_verified,
  created_at: r.created_at.toISOString(),
  last_used_at: r.last_used_at.toISOString(),
});

const COLUMNS = 'id, user_id, provider, email, email_verified, created_at, last_used_at';

export async function identitiesOf(db: Queryable, userId: string): Promise<Identity[]> {
  const { rows } = await db.query<IdentityRow>(
    `SELECT ${COLUMNS} FROM basalt.auth_identities WHERE user_id = $1 ORDER BY created_at, id`,
    [userId],
  );
  return rows.map(shown);
}

/** The user a provider account is linked to. */
export async function identityOwner(db: Queryable, provider: string, subject: string): Promise<string | undefined> {
  const { rows } = await db.query<{ user_id: string }>(
    'SELECT user_id FROM basalt.auth_identities WHERE provider = $1 AND subject = $2',
    [provider, subject],
  );
  return rows[0]?.user_id;
}

export interface ProviderAccount {
  provider: string;
  subject: string;
  email: string | null;
  emailVerified: boolean;
}

/**
 * Link (or refresh what the provider said about) a provider account; false when it belongs
 * to another user. A new link records whether the user's address is unverified now: such
 * an identity is unlinked when the mailbox is first proven (./ownership.ts).
 */
export async function linkIdentity(db: Queryable, userId: string, a: ProviderAccount): Promise<boolean> {
  const { rows } = await db.query<{ user_id: string }>(
    `INSERT INTO basalt.auth_identities (user_id, provider, subject, email, email_verified, linked_unverified)
     SELECT $1, $2, $3, $4, $5, u.email_verified_at IS NULL FROM basalt.users u WHERE u.id = $1
     ON CONFLICT (provider, subject) DO UPDATE SET email = EXCLUDED.email, email_verified = EXCLUDED.email_verified,
       last_used_at = now() WHERE basalt.auth_identities.user_id = EXCLUDED.user_id
     RETURNING user_id`,
    [userId, a.provider, a.subject, a.email, a.emailVerified],
  );
  return rows.length === 1;
}

/**
 * Unlink one identity, unless it is the user's last way to sign in (no password and no
 * other identity). Row locks on the user make two concurrent unlinks see each other.
 */
export async function unlinkIdentity(
  tx: Queryable,
  userId: string,
  identityId: string,
): Promise<'ok' | 'not_found' | 'last'> {
  const { rows } = await tx.query<{ has_password: boolean; others: number; mine: boolean }>(
    `SELECT u.password_hash IS NOT NULL AS has_password,
            (SELECT count(*)::int FROM basalt.auth_identities i WHERE i.user_id = u.id AND i.id <> $2) AS others,
            EXISTS (SELECT 1 FROM basalt.auth_identities i WHERE i.user_id = u.id AND i.id = $2) AS mine
       FROM basalt.users u WHERE u.id = $1 FOR UPDATE`,
    [userId, identityId],
  );
  const r = rows[0];
  if (!r?.mine) return 'not_found';
  if (!r.has_password && r.others === 0) return 'last';
  await tx.query('DELETE FROM basalt.auth_identities WHERE id = $1 AND user_id = $2', [identityId, userId]);
  return 'ok';
}

export type OneTimePurpose = 'exchange' | 'link';

export async function issueOneTimeCode(
  db: Queryable,
  purpose: OneTimePurpose,
  userId: string,
  amr: readonly string[],
): Promise<string> {
  const t = newOpaqueToken();
  await db.query(
    `INSERT INTO basalt.auth_exchange_codes (id, purpose, secret_hash, user_id, amr, expires_at)
     VALUES ($1, $2, $3, $4, $5::text[], now() + make_interval(secs => $6))`,
    [t.id, purpose, t.hash, userId, amr, ONE_TIME_CODE_SECONDS],
  );
  return t.token;
}

/**
 * Spend a code: deleted by the same statement that finds it, so of two requests racing
 * with one code exactly one gets it. A wrong secret also spends it (its id leaked: the
 * code is no longer trustworthy).
 */
export async function spendOneTimeCode(
  db: Queryable,
  purpose: OneTimePurpose,
  presented: string,
): Promise<{ userId: string; amr: string[] } | undefined> {
  const parsed = parseOpaqueToken(presented);
  if (!parsed) return undefined;
  const { rows } = await db.query<{ secret_hash: Uint8Array; user_id: string; amr: string[] }>(
    `DELETE FROM basalt.auth_exchange_codes WHERE id = $1 AND purpose = $2 AND expires_at > now()
     RETURNING secret_hash, user_id, amr`,
    [parsed.id, purpose],
  );
  const row = rows[0];
  if (!row || !secretMatches(parsed.secret, row.secret_hash)) return undefined;
  return { userId: row.user_id, amr: row.amr };
}
