/**
 * `basalt export-to URL` (docs/backup.md): copy a stopped instance's embedded database
 * into an empty external PostgreSQL database so the same site continues there, on as many
 * instances as needed. The target's schema comes from the platform's own migrations (the
 * platform schema, the operator's migrations.dir, each extension's migrations, exactly the
 * ones the embedded database recorded); then every table of `basalt`, the data schema
 * and `ext_*` is copied in one target transaction, in batches of parameterized inserts
 * (values through their text form, so every type round-trips exactly), sequences are set
 * to the source's positions, and the row counts are compared before it commits.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Db, Queryable } from '../../db/engine';
import { quoteIdent } from '../../db/engine';
import { listSqlFiles, migrateDir, migratePlatform } from '../../db/migrate';
import { platformMigrations } from '../../db/platform-migrations';
import { extensionSchema } from '../../extensions/context';
import { countRows, listTables } from './service';

/** Refused or failed; one line an operator can act on. */
export class ExportError extends Error {}

export interface ExportOptions {
  source: Db;
  target: Db;
  dataSchema: string;
  migrationsDir: string;
  extensionsDir: string;
  /** Rows per insert statement (bounded by PostgreSQL's 65535 parameters). */
  batch?: number;
  progress?: (line: string) => void;
}

export interface ExportResult {
  tables: { table: string; source: number; target: number }[];
  sequences: number;
  ms: number;
}

const qname = (schema: string, name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;
const checksum = (text: string) => createHash('sha256').update(text).digest('hex');

/** The first few user objects of the target; empty when the database is empty. */
async function targetObjects(target: Queryable): Promise<string[]> {
  const { rows } = await target.query<{ name: string }>(
    `SELECT n.nspname || '.' || c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
        AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
      ORDER BY 1 LIMIT 3`,
  );
  const schemas = await target.query<{ name: string }>(
    `SELECT nspname AS name FROM pg_namespace WHERE nspname = 'basalt' OR nspname LIKE 'ext\\_%' LIMIT 3`,
  );
  return [...rows.map((r) => r.name), ...schemas.rows.map((r) => `schema ${r.name}`)];
}

interface ExtensionPlan {
  name: string;
  folder: string;
}

/**
 * What the target's migrations will be: exactly what the embedded database recorded. A
 * file it applied that is gone, or a file it has not applied yet, is refused before the
 * target is touched (the copied bookkeeping must match the schema the target gets).
 */
async function plan(o: ExportOptions): Promise<ExtensionPlan[]> {
  const { source } = o;
  const platformDone = (
    await source.query<{ name: string }>('SELECT name FROM basalt.platform_migrations ORDER BY name')
  ).rows.map((r) => r.name);
  const known = new Set(platformMigrations.map((m) => m.name));
  const unknown = platformDone.filter((n) => !known.has(n));
  if (unknown.length)
    throw new ExportError(
      `the embedded database has platform migration ${unknown[0]}, which this basalt does not know: run export-to with the Basalt version that last served it`,
    );
  if (platformDone.length < known.size)
    throw new ExportError(
      "the embedded database's platform schema is older than this basalt: run 'basalt migrate' first",
    );

  const applied = (
    await source.query<{ name: string; checksum: string }>(
      'SELECT name, checksum FROM basalt.schema_migrations ORDER BY name',
    )
  ).rows;
  const files = listSqlFiles(o.migrationsDir);
  const fileNames = new Set(files.map((f) => f.name));
  const gone = applied.find((a) => !fileNames.has(a.name));
  if (gone)
    throw new ExportError(
      `migration ${gone.name} was applied to the embedded database but is not in migrations.dir (${o.migrationsDir}); put it back and try again`,
    );
  const pending = files.find((f) => !applied.some((a) => a.name === f.name));
  if (pending)
    throw new ExportError(
      `migrations.dir has ${pending.name}, not yet applied to the embedded database: run 'basalt migrate' first (or move the file away)`,
    );

  const ext = (
    await source.query<{ extension: string; name: string; checksum: string }>(
      'SELECT extension, name, checksum FROM basalt.extension_migrations ORDER BY extension, name',
    )
  ).rows;
  const byExt = new Map<string, { name: string; checksum: string }[]>();
  for (const r of ext) byExt.set(r.extension, [...(byExt.get(r.extension) ?? []), r]);
  const folders = existsSync(o.extensionsDir)
    ? readdirSync(o.extensionsDir, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => join(o.extensionsDir, d.name))
    : [];
  const out: ExtensionPlan[] = [];
  for (const [name, recorded] of byExt) {
    const matches = (folder: string) => {
      const fs = listSqlFiles(join(folder, 'migrations'));
      return (
        fs.length === recorded.length &&
        fs.every(
          (f, i) => f.name === recorded[i]!.name && checksum(readFileSync(f.path, 'utf8')) === recorded[i]!.checksum,
        )
      );
    };
    const folder = [join(o.extensionsDir, name), ...folders].find((f) => existsSync(f) && matches(f));
    if (!folder)
      throw new ExportError(
        `extension ${name}: no folder in extensions.dir (${o.extensionsDir}) has the migrations the embedded database applied for it; restore that extension's folder (same version) and try again`,
      );
    out.push({ name, folder });
  }
  return out;
}

interface Column {
  name: string;
  type: string;
}

async function columnsOf(q: Queryable, table: string): Promise<Column[]> {
  const { rows } = await q.query<Column>(
    `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
      WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum`,
    [table],
  );
  return rows;
}

export async function exportTo(o: ExportOptions): Promise<ExportResult> {
  const started = performance.now();
  const { source, target } = o;
  const say = o.progress ?? (() => {});
  const found = await targetObjects(target);
  if (found.length)
    throw new ExportError(
      `the target database is not empty (it has ${found.join(', ')}); export-to needs an empty database: create one (CREATE DATABASE …) and try again`,
    );
  const extensions = await plan(o);

  // The schema, by the platform's own migrations.
  say('creating the schema on the target (platform, operator and extension migrations)');
  await migratePlatform(target);
  const sourceSchemas = (
    await source.query<{ name: string }>(
      `SELECT nspname AS name FROM pg_namespace WHERE nspname = $1 OR nspname LIKE 'ext\\_%'`,
      [o.dataSchema],
    )
  ).rows.map((r) => r.name);
  // Extension schemas exist whether or not the extension has migrations (the loader makes them); the data schema is the operator's migrations' to create, as on any instance.
  for (const s of sourceSchemas)
    if (s.startsWith('ext_')) await target.exec(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(s)}`);
  await migrateDir(target, o.migrationsDir, { table: 'basalt.schema_migrations', schema: o.dataSchema });
  for (const e of extensions) {
    await target.exec(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(extensionSchema(e.name))}`);
    await migrateDir(target, join(e.folder, 'migrations'), {
      table: 'basalt.extension_migrations',
      schema: extensionSchema(e.name),
      scope: { column: 'extension', value: e.name },
    });
  }

  const tables = await listTables(source, o.dataSchema);
  const targetTables = new Set((await listTables(target, o.dataSchema)).map((t) => `${t.schema}.${t.name}`));
  const missing = tables.find((t) => !targetTables.has(`${t.schema}.${t.name}`));
  if (missing)
    throw new ExportError(
      `table ${missing.schema}.${missing.name} exists in the embedded database but the migrations did not create it on the target (made by hand?); create it with a migration and start again on an empty database`,
    );
  const sourceCounts = await countRows(source, tables);

  // One source transaction (a cursor per table) and one target transaction: all or nothing.
  const src = await source.begin();
  const tx = await target.begin();
  const result: ExportResult['tables'] = [];
  let sequences = 0;
  try {
    // Types named with their schema whatever either side's search_path is.
    await src.exec('SET LOCAL search_path TO pg_catalog');
    const schemaList = [...new Set(['basalt', o.dataSchema, ...sourceSchemas])];
    // Foreign keys are dropped for the copy and re-added (and so checked) at the end; user triggers stay off meanwhile.
    const fks = (
      await tx.query<{ tbl: string; name: string; def: string }>(
        `SELECT conrelid::regclass::text AS tbl, conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
        WHERE contype = 'f' AND connamespace IN (SELECT oid FROM pg_namespace WHERE nspname = ANY($1::text[]))`,
        [schemaList],
      )
    ).rows;
    for (const fk of fks) await tx.exec(`ALTER TABLE ${fk.tbl} DROP CONSTRAINT ${quoteIdent(fk.name)}`);
    const all = await listTables(tx, o.dataSchema);
    for (const t of all) await tx.exec(`ALTER TABLE ${qname(t.schema, t.name)} DISABLE TRIGGER USER`);
    // Rows the migrations seeded (default templates, …) give way to the source's.
    if (all.length) await tx.exec(`TRUNCATE ${all.map((t) => qname(t.schema, t.name)).join(', ')}`);

    for (const t of tables) {
      const name = qname(t.schema, t.name);
      const cols = await columnsOf(src, name);
      const targetCols = new Set((await columnsOf(tx, name)).map((c) => c.name));
      const absent = cols.find((c) => !targetCols.has(c.name));
      if (absent)
        throw new ExportError(
          `column ${t.schema}.${t.name}.${absent.name} exists in the embedded database but not on the target`,
        );
      if (!cols.length) continue;
      const per = Math.max(1, Math.min(o.batch ?? 1000, Math.floor(60_000 / cols.length)));
      await src.exec(
        `DECLARE basalt_export NO SCROLL CURSOR FOR SELECT ${cols.map((c, i) => `${quoteIdent(c.name)}::text AS c${i}`).join(', ')} FROM ${name}`,
      );
      const head = `INSERT INTO ${name} (${cols.map((c) => quoteIdent(c.name)).join(', ')}) OVERRIDING SYSTEM VALUE VALUES `;
      let copied = 0;
      // The next batch is read from the embedded engine while the target inserts this one.
      const fetchNext = () => src.query<Record<string, string | null>>(`FETCH ${per} FROM basalt_export`);
      let next = fetchNext();
      for (;;) {
        const { rows } = await next;
        if (!rows.length) break;
        next = fetchNext();
        next.catch(() => {}); // awaited next round; an insert failing first must not leave it unhandled
        const params: (string | null)[] = [];
        const tuples = rows.map((r) => {
          const placeholders = cols.map((c, i) => {
            params.push(r[`c${i}`] ?? null);
            return `$${params.length}::text::${c.type}`;
          });
          return '(' + placeholders.join(', ') + ')';
        });
        await tx.query(head + tuples.join(', '), params);
        copied += rows.length;
      }
      await src.exec('CLOSE basalt_export');
      say(`copied ${t.schema}.${t.name}: ${copied} rows`);
    }

    for (const t of all) await tx.exec(`ALTER TABLE ${qname(t.schema, t.name)} ENABLE TRIGGER USER`);
    for (const fk of fks) await tx.exec(`ALTER TABLE ${fk.tbl} ADD CONSTRAINT ${quoteIdent(fk.name)} ${fk.def}`);

    // Sequences (serial and identity columns included) continue where the source's stand.
    const seqs = (
      await src.query<{ schema: string; name: string }>(
        `SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind = 'S' AND n.nspname = ANY($1::text[]) ORDER BY 1, 2`,
        [schemaList],
      )
    ).rows;
    for (const s of seqs) {
      const { rows } = await src.query<{ last: string; called: boolean }>(
        `SELECT last_value::text AS last, is_called AS called FROM ${qname(s.schema, s.name)}`,
      );
      await tx.query('SELECT setval($1::regclass, $2::int8, $3)', [
        qname(s.schema, s.name),
        rows[0]!.last,
        rows[0]!.called,
      ]);
      sequences++;
    }

    const targetCounts = await countRows(tx, tables);
    for (const t of tables) {
      const k = `${t.schema}.${t.name}`;
      result.push({ table: k, source: sourceCounts[k]!, target: targetCounts[k]! });
    }
    const wrong = result.find((r) => r.source !== r.target);
    if (wrong)
      throw new ExportError(
        `row counts differ for ${wrong.table} (${wrong.source} in the embedded database, ${wrong.target} copied); nothing was committed`,
      );
    await tx.commit();
  } catch (e) {
    await tx.rollback();
    await src.rollback();
    if (e instanceof ExportError) throw e;
    throw new ExportError(
      `copying failed, nothing was committed (the target keeps only the schema; drop and recreate it before trying again): ${(e as Error).message.split('\n')[0]}`,
    );
  }
  await src.rollback();
  return { tables: result, sequences, ms: Math.round(performance.now() - started) };
}
