/**
 * The one-time setup link `serve` prints while no administrator exists
 * (docs/admin.md): 32 random bytes in the URL fragment (never in logs or Referer),
 * only their SHA-256 stored, valid 30 minutes, spent atomically with the creation of
 * the first administrator.
 */
import type { Queryable } from '../../db/engine';
import { hashOfPresented, newSecretToken } from './secret-token';

export const SETUP_LINK_MINUTES = 30;

export async function issueSetupToken(q: Queryable): Promise<string> {
  const t = newSecretToken();
  await q.query(
    `INSERT INTO basalt.admin_setup_tokens (token_hash, expires_at) VALUES ($1, now() + make_interval(mins => $2::int))`,
    [t.hash, SETUP_LINK_MINUTES],
  );
  // Expired links are of no use to anyone: keep the table small.
  await q.query(`DELETE FROM basalt.admin_setup_tokens WHERE expires_at < now() - interval '1 day'`);
  return t.token;
}

/**
 * Spend a setup token inside the caller's transaction (which holds ADMINS_LOCK and has
 * checked that no administrator exists). False when unknown, used or expired. Every
 * other outstanding link dies with it: setup happens once.
 */
export async function spendSetupToken(q: Queryable, token: string): Promise<boolean> {
  const hash = hashOfPresented(token);
  if (!hash) return false;
  const { rowCount } = await q.query(
    'UPDATE basalt.admin_setup_tokens SET used_at = now() WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()',
    [hash],
  );
  if (rowCount !== 1) return false;
  await q.query('UPDATE basalt.admin_setup_tokens SET used_at = now() WHERE used_at IS NULL');
  return true;
}

/** The link an operator opens: `<main base url>/_/#/setup?token=…`. */
export function setupLink(mainBaseUrl: string, token: string): string {
  return `${mainBaseUrl.replace(/\/$/, '')}/_/#/setup?token=${token}`;
}
