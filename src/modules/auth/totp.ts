/**
 * The TOTP second factor (RFC 6238 through `otpauth`: SHA-1, 6 digits, 30 s steps, one
 * step either side for clock drift), its recovery codes, and the pending second step of
 * a sign-in (`mfa_token`). docs/auth.md, Second factor.
 *
 * One use per code: the time step of the last accepted code is kept and only a later
 * step passes, in one conditional UPDATE, so a replayed (or concurrently raced) code is
 * refused. Recovery codes and mfa tokens are high-entropy, so SHA-256 is their hash.
 * The secret itself must be readable to check codes: it is sealed (AES-256-GCM, bound to
 * the user, `SecretBox` of src/db/secrets.ts) and opened only to check a code.
 */
import { timingSafeEqual } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import type { Queryable } from '../../db/engine';
import type { SecretBox } from '../../db/secrets';
import { newOpaqueToken, parseOpaqueToken, secretMatches, sha256 } from './tokens';

const PERIOD = 30;
/** The purpose of the `SecretBox` sealing TOTP secrets (its key: `box:auth_totp` in basalt.secrets). */
export const TOTP_BOX = 'auth_totp';
const RECOVERY_CODES = 10;
/** How long the second step of a sign-in may take. */
export const MFA_TOKEN_SECONDS = 5 * 60;

function totpOf(secret: string, label: string, issuer: string): TOTP {
  return new TOTP({ issuer, label, algorithm: 'SHA1', digits: 6, period: PERIOD, secret: Secret.fromBase32(secret) });
}

/** Start (or restart) enrolment: a new unconfirmed secret; null when a confirmed one exists. */
export async function enrollTotp(
  db: Queryable,
  box: SecretBox,
  userId: string,
  label: string,
  issuer: string,
): Promise<{ secret: string; otpauth_url: string } | null> {
  const secret = new Secret({ size: 20 }).base32;
  const { rowCount } = await db.query(
    `INSERT INTO basalt.auth_totp (user_id, secret) VALUES ($1, $2)
     ON CONFLICT (user_id) DO UPDATE SET secret = EXCLUDED.secret, last_step = NULL, created_at = now()
       WHERE basalt.auth_totp.confirmed_at IS NULL`,
    [userId, box.seal(secret, userId)],
  );
  if (!rowCount) return null;
  return { secret, otpauth_url: totpOf(secret, label, issuer).toString() };
}

/** none, enrolled but not confirmed (pending), or on (enabled). */
export async function totpState(db: Queryable, userId: string): Promise<'none' | 'pending' | 'enabled'> {
  const { rows } = await db.query<{ confirmed: boolean }>(
    'SELECT confirmed_at IS NOT NULL AS confirmed FROM basalt.auth_totp WHERE user_id = $1',
    [userId],
  );
  return !rows[0] ? 'none' : rows[0].confirmed ? 'enabled' : 'pending';
}

/** Whether the user has a confirmed TOTP factor (the sign-in then asks for it). */
export async function totpEnabled(db: Queryable, userId: string): Promise<boolean> {
  return (await totpState(db, userId)) === 'enabled';
}

/**
 * Check a code against the user's secret (confirmed, or pending when `pending`), and spend
 * its time step. False for a wrong code, a code of a step already used, or no secret.
 */
export async function useTotpCode(
  db: Queryable,
  box: SecretBox,
  userId: string,
  code: string,
  pending = false,
): Promise<boolean> {
  if (!/^\d{6}$/.test(code)) return false;
  const { rows } = await db.query<{ secret: string }>(
    `SELECT secret FROM basalt.auth_totp WHERE user_id = $1 AND confirmed_at IS ${pending ? '' : 'NOT '}NULL`,
    [userId],
  );
  const secret = rows[0] && box.open(rows[0].secret, userId);
  if (!secret) return false;
  const totp = totpOf(secret, 'x', 'x');
  const now = Date.now();
  const delta = totp.validate({ token: code, timestamp: now, window: 1 });
  if (delta === null) return false;
  const step = totp.counter({ timestamp: now }) + delta;
  const spent = await db.query(
    `UPDATE basalt.auth_totp SET last_step = $2 WHERE user_id = $1 AND (last_step IS NULL OR last_step < $2)`,
    [userId, step],
  );
  return spent.rowCount === 1;
}

/** Confirm a pending enrolment with a code; returns the new recovery codes (shown once), or null. */
export async function confirmTotp(
  tx: Queryable,
  box: SecretBox,
  userId: string,
  code: string,
): Promise<string[] | null> {
  if (!(await useTotpCode(tx, box, userId, code, true))) return null;
  await tx.query('UPDATE basalt.auth_totp SET confirmed_at = now() WHERE user_id = $1', [userId]);
  return replaceRecoveryCodes(tx, userId);
}

/** Turn the factor off (and drop its recovery codes). */
export async function removeTotp(tx: Queryable, userId: string): Promise<boolean> {
  const { rowCount } = await tx.query('DELETE FROM basalt.auth_totp WHERE user_id = $1', [userId]);
  await tx.query('DELETE FROM basalt.auth_recovery_codes WHERE user_id = $1', [userId]);
  return rowCount > 0;
}

/** `xxxxx-xxxxx` in lower-case RFC 4648 base32 (no 0, 1 or 8): 50 random bits each. */
function recoveryCode(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const bytes = crypto.getRandomValues(new Uint8Array(10));
  const chars = [...bytes].map((b) => alphabet[b & 31]);
  return `${chars.slice(0, 5).join('')}-${chars.slice(5).join('')}`;
}

/** Normalized for comparison: case, spaces and the dash do not matter when typed. */
const canonical = (code: string) => code.toLowerCase().replace(/[\s-]/g, '');

async function replaceRecoveryCodes(tx: Queryable, userId: string): Promise<string[]> {
  await tx.query('DELETE FROM basalt.auth_recovery_codes WHERE user_id = $1', [userId]);
  const codes = Array.from({ length: RECOVERY_CODES }, recoveryCode);
  for (const c of codes)
    await tx.query('INSERT INTO basalt.auth_recovery_codes (user_id, code_hash) VALUES ($1, $2)', [
      userId,
      sha256(canonical(c)),
    ]);
  return codes;
}

/** Spend one unused recovery code of the user; false when none matches. */
export async function useRecoveryCode(db: Queryable, userId: string, code: string): Promise<boolean> {
  if (code.length > 40) return false;
  const presented = sha256(canonical(code));
  const { rows } = await db.query<{ id: string; code_hash: Uint8Array }>(
    'SELECT id, code_hash FROM basalt.auth_recovery_codes WHERE user_id = $1 AND used_at IS NULL',
    [userId],
  );
  // Compared one by one in constant time (at most 10 rows), never looked up by the hash.
  const hit = rows.find((r) => r.code_hash.length === presented.length && timingSafeEqual(r.code_hash, presented));
  if (!hit) return false;
  const { rowCount } = await db.query(
    'UPDATE basalt.auth_recovery_codes SET used_at = now() WHERE id = $1 AND used_at IS NULL',
    [hit.id],
  );
  return rowCount === 1;
}

/** Unused recovery codes left. */
export async function recoveryCodesLeft(db: Queryable, userId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM basalt.auth_recovery_codes WHERE user_id = $1 AND used_at IS NULL',
    [userId],
  );
  return rows[0]!.n;
}

/** The pending second step of a sign-in whose first factor (`amr`) passed. */
export async function issueMfaChallenge(db: Queryable, userId: string, amr: readonly string[]): Promise<string> {
  const t = newOpaqueToken();
  await db.query(
    `INSERT INTO basalt.auth_mfa_challenges (id, secret_hash, user_id, amr, expires_at)
     VALUES ($1, $2, $3, $4::text[], now() + make_interval(secs => $5))`,
    [t.id, t.hash, userId, amr, MFA_TOKEN_SECONDS],
  );
  return t.token;
}

/** The user and first-factor `amr` of a live mfa token (not spent: a wrong code leaves it usable). */
export async function mfaChallenge(
  db: Queryable,
  token: string,
): Promise<{ id: string; userId: string; amr: string[] } | undefined> {
  const parsed = parseOpaqueToken(token);
  if (!parsed) return undefined;
  const { rows } = await db.query<{ secret_hash: Uint8Array; user_id: string; amr: string[] }>(
    'SELECT secret_hash, user_id, amr FROM basalt.auth_mfa_challenges WHERE id = $1 AND expires_at > now()',
    [parsed.id],
  );
  const row = rows[0];
  if (!row || !secretMatches(parsed.secret, row.secret_hash)) return undefined;
  return { id: parsed.id, userId: row.user_id, amr: row.amr };
}

/** Spend a challenge; false when another request spent it first. */
export async function spendMfaChallenge(db: Queryable, id: string): Promise<boolean> {
  return (await db.query('DELETE FROM basalt.auth_mfa_challenges WHERE id = $1', [id])).rowCount === 1;
}
