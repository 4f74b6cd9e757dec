/**
 * Platform migration 160, a TypeScript step: TOTP secrets stored before they were sealed
 * are sealed now (AES-256-GCM bound to the user, `SecretBox` of ../secrets.ts, its key
 * created in basalt.secrets inside the migration transaction). docs/auth.md, Second factor.
 */
import type { Queryable } from '../engine';
import { SecretBox } from '../secrets';
import { TOTP_BOX } from '../../modules/auth/totp';

export async function sealTotpSecrets(tx: Queryable): Promise<void> {
  const box = await SecretBox.of(tx, TOTP_BOX);
  const { rows } = await tx.query<{ user_id: string; secret: string }>('SELECT user_id, secret FROM basalt.auth_totp');
  for (const r of rows)
    if (!SecretBox.isSealed(r.secret))
      await tx.query('UPDATE basalt.auth_totp SET secret = $2 WHERE user_id = $1', [
        r.user_id,
        box.seal(r.secret, r.user_id),
      ]);
}
