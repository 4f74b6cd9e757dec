import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Queryable } from './engine';

/**
 * Generated secrets (e.g. the JWT signing key), created on first use and kept in the
 * platform database so every instance on one database agrees. For the embedded engine
 * that database lives in the data dir.
 */
export async function getOrCreateSecret(db: Queryable, name: string, bytes = 48): Promise<string> {
  const fresh = Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('base64url');
  await db.query('INSERT INTO basalt.secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    name,
    fresh,
  ]);
  const { rows } = await db.query<{ value: string }>('SELECT value FROM basalt.secrets WHERE name = $1', [name]);
  return rows[0]!.value;
}

/** How a sealed value starts: the format's version. */
const SEALED = 'v1.';

/**
 * Values that must be readable again but not lie readable in their table (TOTP secrets):
 * AES-256-GCM under a generated key kept in `basalt.secrets` (one per purpose), bound to
 * a context such as the row's owner, so a sealed value copied to another row does not
 * open. A copy of the table alone (an export, a log of rows, a query that reached only
 * that table) shows nothing usable; a copy of the whole database holds the key too, as
 * it holds the signing key (docs/auth.md, Second factor).
 */
export class SecretBox {
  private constructor(private key: Buffer) {}

  /** The box of `purpose`, its key created on first use (inside `db`'s transaction when it is one). */
  static async of(db: Queryable, purpose: string): Promise<SecretBox> {
    return new SecretBox(Buffer.from(await getOrCreateSecret(db, `box:${purpose}`, 32), 'base64url'));
  }

  /** Whether `value` is sealed (not a plain value from before sealing). */
  static isSealed(value: string): boolean {
    return value.startsWith(SEALED);
  }

  /** `v1.<iv>.<ciphertext>.<tag>`, base64url parts. */
  seal(plain: string, context: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv).setAAD(Buffer.from(context));
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return `${SEALED}${[iv, body, c.getAuthTag()].map((b) => b.toString('base64url')).join('.')}`;
  }

  /** The plain value, or undefined when `sealed` is not one of this box's for `context`. */
  open(sealed: string, context: string): string | undefined {
    if (!SecretBox.isSealed(sealed)) return undefined;
    const [iv, body, tag] = sealed
      .slice(SEALED.length)
      .split('.')
      .map((p) => Buffer.from(p, 'base64url'));
    if (!iv || !body || !tag || iv.length !== 12 || tag.length !== 16) return undefined;
    try {
      const d = createDecipheriv('aes-256-gcm', this.key, iv).setAAD(Buffer.from(context)).setAuthTag(tag);
      return Buffer.concat([d.update(body), d.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }
}
