/**
 * Platform migration 140, a TypeScript step (PostgreSQL has no IDNA conversion): e-mail
 * domains to their ASCII (punycode) form, the spelling `normalizeEmail` now gives them
 * (docs/auth.md, E-mail addresses), so `a@bücher.example` and `a@xn--bcher-kva.example`
 * are one address. As 060 and 090 did for their rules: each stored address whose
 * domain is not ASCII is rewritten to the converted spelling where that spelling is free
 * (the oldest first when several convert to one); a site user whose converted spelling
 * belongs to another account is a look-alike of it and is disabled, kept unchanged for
 * an administrator to resolve; an administrator whose converted spelling is taken is
 * left as it is (`basalt admin list` shows both, `basalt admin delete` removes one). A
 * domain IDNA refuses stays as it is. Like every platform migration this runs once, in
 * the migration transaction, on both engines.
 */
import type { Queryable } from '../engine';
import { normalizeEmail } from '../../modules/auth/users';

/** Rows with any character outside printable ASCII, oldest first; the domain is checked here. */
const CANDIDATES = (table: string) =>
  `SELECT id, email FROM basalt.${table} WHERE email !~ '^[ -~]*$' ORDER BY created_at, id`;

export async function emailIdnDomains(tx: Queryable): Promise<void> {
  for (const table of ['users', 'admins'] as const) {
    const moves = (await tx.query<{ id: string; email: string }>(CANDIDATES(table))).rows
      .map((r) => ({ id: r.id, to: normalizeEmail(r.email), from: r.email }))
      .filter((m) => m.to !== m.from);
    if (!moves.length) continue;
    const taken = new Set(
      (
        await tx.query<{ email: string }>(`SELECT email FROM basalt.${table} WHERE email = ANY ($1::text[])`, [
          moves.map((m) => m.to),
        ])
      ).rows.map((r) => r.email),
    );
    for (const m of moves) {
      if (!taken.has(m.to)) {
        await tx.query(`UPDATE basalt.${table} SET email = $2, updated_at = now() WHERE id = $1`, [m.id, m.to]);
        taken.add(m.to);
      } else if (table === 'users') {
        await tx.query(
          'UPDATE basalt.users SET disabled_at = coalesce(disabled_at, now()), updated_at = now() WHERE id = $1',
          [m.id],
        );
      }
    }
  }
}
