/**
 * A database as an older Basalt left it: the platform migrations up to and including `last`,
 * recorded as applied, so a test can put old rows in and watch the next migrations upgrade them.
 */
import type { Db } from '../../src/db/engine';
import { platformMigrations } from '../../src/db/platform-migrations';

export async function platformAt(db: Db, last: string): Promise<void> {
  const upTo = platformMigrations.findIndex((m) => m.name === last);
  if (upTo < 0) throw new Error(`no platform migration ${last}`);
  await db.exec(`CREATE SCHEMA basalt;
    CREATE TABLE basalt.platform_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
  await db.transaction(async (tx) => {
    for (const m of platformMigrations.slice(0, upTo + 1)) {
      if ('sql' in m) await tx.exec(m.sql);
      else await m.run(tx);
      await tx.query('INSERT INTO basalt.platform_migrations (name) VALUES ($1)', [m.name]);
    }
  });
}
