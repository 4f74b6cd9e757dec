/**
 * The schema editor of the Data screen (docs/admin-api.md, "Schema editor"): a table's
 * structure read from the catalog, and changes (data-schema-changes.ts) previewed — their
 * SQL and warnings, run in a transaction that is rolled back — or applied: one audited
 * transaction (`data.schema`) whose lock waits are bounded, written as the next file of
 * `migrations.dir` and recorded as applied, as the Access view's changes are
 * (data-access-changes.ts), so the migrations stay the one source of truth.
 */
import { basename } from 'node:path';
import type { Queryable } from '../../db/engine';
import type { Basalt } from '../../services';
import type { Actor } from './audit';
import { boundLocks, forget, recordMigration } from './data-access-changes';
import { POLICIES_SQL, type Policy } from './data-access';
import { schemaStatements, type SchemaChange, type SchemaStatements } from './data-schema-changes';
import { AdminErrors } from './errors';

export interface TableStructure {
  table: string;
  rls: boolean;
  columns: {
    name: string;
    type: string;
    not_null: boolean;
    default: string | null;
    /** `always` / `by default` for an identity column, else null. */
    identity: 'always' | 'by default' | null;
  }[];
  constraints: { name: string; type: 'primary_key' | 'unique' | 'foreign_key' | 'check'; definition: string }[];
  indexes: { name: string; definition: string; unique: boolean; constraint: string | null }[];
  policies: Policy[];
}

const COLUMNS_SQL = `
SELECT a.attname AS name, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS default,
       CASE a.attidentity WHEN 'a' THEN 'always' WHEN 'd' THEN 'by default' END AS identity
  FROM pg_catalog.pg_attribute a
  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attrelid = $1::int8::oid AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum`;

const CONSTRAINTS_SQL = `
SELECT conname AS name,
       CASE contype WHEN 'p' THEN 'primary_key' WHEN 'u' THEN 'unique' WHEN 'f' THEN 'foreign_key' ELSE 'check' END AS type,
       pg_catalog.pg_get_constraintdef(oid) AS definition
  FROM pg_catalog.pg_constraint WHERE conrelid = $1::int8::oid AND contype IN ('p', 'u', 'f', 'c')
 ORDER BY conname`;

const INDEXES_SQL = `
SELECT x.relname AS name, pg_catalog.pg_get_indexdef(i.indexrelid) AS definition, i.indisunique AS unique,
       (SELECT conname FROM pg_catalog.pg_constraint WHERE conindid = i.indexrelid AND conrelid = i.indrelid LIMIT 1) AS constraint
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class x ON x.oid = i.indexrelid
 WHERE i.indrelid = $1::int8::oid
 ORDER BY x.relname`;

/** Thrown to roll a preview's transaction back; caught where it is thrown. */
const PREVIEWED = new Error('schema preview: rolled back');

export function createDataSchema(p: Basalt) {
  const schema = () => p.services.database.catalog.schema;
  /** The file is named after the first table changed; `create` when every change creates a table. */
  const label = (changes: SchemaChange[]) => ({
    table: changes[0]!.table,
    what: changes.every((c) => c.op === 'create_table') ? 'create' : 'schema',
  });

  return {
    /** Columns, constraints, indexes and policies of `name`, as PostgreSQL prints them; 404 when absent. */
    async structure(name: string, q: Queryable = p.db): Promise<TableStructure> {
      // No table's name holds a NUL, which PostgreSQL refuses in any text it is sent.
      if (name.includes('\0')) throw AdminErrors.notFound(`Table '${name.replace(/\0/g, '')}'`);
      const { rows } = await q.query<{ oid: string; rls: boolean }>(
        `SELECT c.oid::int8::text AS oid, c.relrowsecurity AS rls FROM pg_catalog.pg_class c
           JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
        [schema(), name],
      );
      if (!rows[0]) throw AdminErrors.notFound(`Table '${name}'`);
      const oid = rows[0].oid;
      const [columns, constraints, indexes, policies] = await Promise.all([
        q.query<TableStructure['columns'][number]>(COLUMNS_SQL, [oid]),
        q.query<TableStructure['constraints'][number]>(CONSTRAINTS_SQL, [oid]),
        q.query<TableStructure['indexes'][number]>(INDEXES_SQL, [oid]),
        q.query<Policy>(POLICIES_SQL, [schema(), name]),
      ]);
      return {
        table: name,
        rls: rows[0].rls,
        columns: columns.rows,
        constraints: constraints.rows,
        indexes: indexes.rows,
        policies: policies.rows.map((r) => ({ ...r, roles: [...r.roles] })),
      };
    },

    /** The statements and warnings of `changes`, run in a transaction that is always rolled back; not audited. */
    async preview(changes: SchemaChange[]): Promise<SchemaStatements> {
      let out: SchemaStatements = { statements: [], warnings: [] };
      try {
        await p.db.transaction(async (tx) => {
          await boundLocks(tx);
          out = await schemaStatements(tx, schema(), changes);
          throw PREVIEWED;
        });
      } catch (e) {
        if (e !== PREVIEWED) throw e;
      }
      return out;
    },

    /** Apply `changes` in one audited transaction written as one migration file; answers its SQL, warnings and file. */
    async apply(
      actor: Actor,
      changes: SchemaChange[],
    ): Promise<SchemaStatements & { migration: { file: string; statements: string[] } }> {
      const { table, what } = label(changes);
      let written: string | undefined;
      let out: SchemaStatements & { migration: { file: string; statements: string[] } };
      try {
        out = await p.services.admin.audited(actor, 'data.schema', async (tx, note) => {
          await boundLocks(tx);
          const done = await schemaStatements(tx, schema(), changes);
          const migration = await recordMigration(p, tx, table, what, done.statements);
          written = migration.file;
          const tables = [...new Set(changes.map((c) => c.table))];
          note(tables.join(', '), { changes, migration: basename(migration.file) });
          return { ...done, migration };
        });
      } catch (e) {
        forget(written);
        throw e;
      }
      // Committed: the file stays whatever happens next.
      await p.services.database.catalog.refresh();
      return out;
    },
  };
}

export type DataSchema = ReturnType<typeof createDataSchema>;
