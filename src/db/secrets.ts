import type { Db } from './engine';

/**
 * Generated secrets (e.g. the JWT signing key), created on first use and kept in the
 * platform database so every instance on one database agrees. For the embedded engine
 * that database lives in the data dir.
 */
export async function getOrCreateSecret(db: Db, name: string, bytes = 48): Promise<string> {
  const fresh = Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('base64url');
  await db.query('INSERT INTO basalt.secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    name,
    fresh,
  ]);
  const { rows } = await db.query<{ value: string }>('SELECT value FROM basalt.secrets WHERE name = $1', [name]);
  return rows[0]!.value;
}
