import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Db } from './engine';
import { platformMigrations } from './platform-migrations';

/** A migration that failed; start-up stops naming the file and the error. */
export class MigrationError extends Error {}

// One arbitrary constant: every instance serializes its migrations on this advisory lock.
export const MIGRATION_LOCK = 0x6261_7361;

function checksum(text: string): string {
  return new Bun.CryptoHasher('sha256').update(text).digest('hex');
}

/** Apply the platform schema. Safe to call from several instances at once. */
export async function migratePlatform(db: Db): Promise<string[]> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.exec(`CREATE SCHEMA IF NOT EXISTS basalt;
      CREATE TABLE IF NOT EXISTS basalt.platform_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set(
      (await tx.query<{ name: string }>('SELECT name FROM basalt.platform_migrations')).rows.map((r) => r.name),
    );
    const applied: string[] = [];
    for (const m of platformMigrations) {
      if (done.has(m.name)) continue;
      try {
        if ('sql' in m) await tx.exec(m.sql);
        else await m.run(tx);
      } catch (e) {
        throw new MigrationError(`platform migration ${m.name} failed: ${(e as Error).message}`);
      }
      await tx.query('INSERT INTO basalt.platform_migrations (name) VALUES ($1)', [m.name]);
      applied.push(m.name);
    }
    return applied;
  });
}

/** List `*.sql` files of a directory in name order (empty when it does not exist). */
export function listSqlFiles(dir: string): { name: string; path: string }[] {
  const abs = resolve(dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((name) => ({ name, path: join(abs, name) }));
}

export interface MigrationTarget {
  /** Table recording applied files, e.g. `basalt.schema_migrations`. */
  table: string;
  /** Schema put first in search_path while the files run. */
  schema: string;
  /** A table shared by several owners (extensions): the key column and this owner's value. */
  scope?: { column: string; value: string };
}

/**
 * Apply `*.sql` files of `dir` in name order, each once and each in its own
 * transaction. A failing file stops everything after it and names the file.
 */
export async function migrateDir(
  db: Db,
  dir: string,
  target: MigrationTarget = { table: 'basalt.schema_migrations', schema: 'public' },
): Promise<string[]> {
  const files = listSqlFiles(dir);
  const applied: string[] = [];
  for (const f of files) {
    const scope = target.scope;
    const ran = await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      // Read under the lock: a file the panel wrote for a transaction that then failed is gone
      // by now (data-access-changes.ts, recordMigration), never run from a copy read before.
      let sql: string;
      try {
        sql = readFileSync(f.path, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw e;
      }
      const seen = scope
        ? await tx.query<{ checksum: string }>(
            `SELECT checksum FROM ${target.table} WHERE name = $1 AND ${scope.column} = $2`,
            [f.name, scope.value],
          )
        : await tx.query<{ checksum: string }>(`SELECT checksum FROM ${target.table} WHERE name = $1`, [f.name]);
      if (seen.rows.length) return false;
      await tx.exec(`SET LOCAL search_path TO "${target.schema.replace(/"/g, '""')}", public`);
      try {
        await tx.exec(sql);
      } catch (e) {
        throw new MigrationError(`migration ${f.path} failed: ${(e as Error).message}`);
      }
      if (scope)
        await tx.query(`INSERT INTO ${target.table} (name, checksum, ${scope.column}) VALUES ($1, $2, $3)`, [
          f.name,
          checksum(sql),
          scope.value,
        ]);
      else await tx.query(`INSERT INTO ${target.table} (name, checksum) VALUES ($1, $2)`, [f.name, checksum(sql)]);
      return true;
    });
    if (ran) applied.push(f.name);
  }
  return applied;
}
