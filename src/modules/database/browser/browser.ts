/**
 * The admin data browser (docs/admin-api.md §Data browser, docs/admin.md "Data browser"):
 * tables of the data schema with their columns and relations, rows paged with the Database
 * API's filter operators, sort and `expand`, row edits, CSV export and import. No HTTP here: the admin
 * routes call it with the admin's transaction (so the audit row commits with the change).
 *
 * Everything goes through the Database API's pieces (docs/database.md): the live catalog
 * (names checked there and quoted by it; only the data schema, never `basalt` or `ext_*`),
 * the query builder (operators, sort, bind parameters), the value codec (bigint as
 * string, bytea as base64, …) and the Postgres error mapping. What is the admin's own:
 * no table whitelist (the admin sees every table of the data schema), a page of at most
 * 500 rows, and counts that stay cheap on big tables (estimates from the planner's
 * statistics; an exact count only for tables of at most 100,000 estimated rows).
 */
import { type Queryable, type QueryResult, underSavepoint } from '../../../db/engine';
import { AppError, Errors } from '../../../http/errors';
import type { Platform } from '../../../platform';
import type { DatabaseService } from '../service';
import type { BrowserCore, Row } from './core';
import { Catalog, type CatalogSnapshot, type Table } from '../catalog';
import type { Filter, QueryBody, Sort } from '../model';
import { mapDbError } from '../pg-errors';
import { answerOf, buildStatement, type Statement } from '../query-builder';
import { decodeRows, encodeValue, ValueError } from '../value-codec';
import { exportCsv, type FormulaMode } from './export';
import { importCsv } from './import';
import { countStatements, ESTIMATE_SQL, explainRows, invalid, isObject, pageBody } from './sql';

export type { Row } from './core';
export type { Filter, Sort } from '../model';
export interface ColumnInfo {
  name: string;
  /** The declared type, e.g. `integer`, `character varying(20)`, `numeric(10,2)`, `text[]`. */
  type: string;
  nullable: boolean;
  /** Filled by the database when left out (DEFAULT, identity or generated column). */
  has_default: boolean;
  /** The table and column this one references (a foreign key), or null. */
  references: { table: string; column: string } | null;
}
/** A relation of the table as the Database API names it for `expand` (docs/database.md, "Relations"). */
export interface RelationInfo {
  name: string;
  /** many_to_one: this table's key refers to `table`; one_to_many: `table`'s key refers to this one. */
  kind: 'many_to_one' | 'one_to_many';
  table: string;
  /** This table's columns of the key and `table`'s, pair by pair in key order. */
  columns: string[];
  target_columns: string[];
}
export interface TableInfo {
  name: string;
  /** The exact number of rows when the table holds at most LIST_EXACT_MAX of them (a bounded count); null above. */
  rows: number | null;
  /** `rows` when known; else the planner's estimate (pg_class statistics scaled to the table's current size; EXPLAIN when there are none). */
  estimated_rows: number;
  /** Primary key columns in key order; empty: browse, export and insert only. */
  primary_key: string[];
  columns: ColumnInfo[];
  /** The catalog's relations of the table, by name (many-to-one first). */
  relations: RelationInfo[];
}
export interface SelectQuery {
  filters?: Filter[];
  sort?: Sort[];
  limit?: number;
  offset?: number;
  /** The Database API's `expand` (docs/database.md, "Relations"): each row's related rows, in the same statement. */
  expand?: Record<string, unknown>;
}
export interface SelectResult {
  rows: Row[];
  count: number;
  /** Rows matching the filters, estimated (pg_class.reltuples unfiltered, EXPLAIN filtered); equals `total` when that is given. */
  estimated_total: number;
  /** Exact count of the matching rows, only when the table holds at most 100,000 rows (estimated). */
  total?: number;
}

export interface DataBrowser {
  tables(): Promise<TableInfo[]>;
  select(table: string, q: SelectQuery): Promise<SelectResult>;
  insert(tx: Queryable, table: string, data: Record<string, unknown>): Promise<Row>;
  update(tx: Queryable, table: string, key: Record<string, unknown>, data: Record<string, unknown>): Promise<Row>;
  /** One row by primary key, read in the caller's transaction (the audit's "before" of an update); null when none. */
  row(tx: Queryable, table: string, key: Record<string, unknown>): Promise<Row | null>;
  deleteRows(tx: Queryable, table: string, keys: Record<string, unknown>[]): Promise<number>;
  /**
   * Every matching row as CSV (header row, RFC 4180), fetched in short batches as the
   * stream is read. The first chunk (header and first batch) is produced only after the
   * table, filters and sort were checked and the first batch was read, so an unknown
   * table (404) or a bad filter (400) rejects the first read: read it before answering.
   */
  exportCsv(
    table: string,
    q: { filters?: Filter[]; sort?: Sort[] },
    formulas?: FormulaMode,
  ): ReadableStream<Uint8Array>;
  importCsv(tx: Queryable, table: string, csv: string): Promise<{ inserted: number }>;
}

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 500;
/** Above this many estimated rows no exact count is made (docs/admin-api.md §Data browser). */
export const EXACT_TOTAL_MAX = 100_000;
export const MAX_DELETE_KEYS = 1000;
/**
 * The table list counts each table exactly up to this many rows (a count over
 * `LIMIT LIST_EXACT_MAX + 1`, so it never reads more whatever the table's size); a
 * bigger table shows the planner's estimate. Estimates of small tables are far off
 * (a never-analyzed 20-row table plans as hundreds), exact counts of them are cheap.
 */
export const LIST_EXACT_MAX = 10_000;
/** How long a table's size estimate is reused (one pg_class read per table per interval). */
const ESTIMATE_TTL_MS = 5_000;

/**
 * A table's relations as the catalog reads them from the foreign keys, and the column each
 * key column references (`ColumnInfo.references`): by the relation it names first, else by
 * the first other key it is part of.
 */
function relationsOf(t: Table): { relations: RelationInfo[]; references: Map<string, ColumnInfo['references']> } {
  const list = [...t.relations.values()].sort(
    (a, b) => (a.kind === b.kind ? 0 : a.kind === 'one' ? -1 : 1) || a.name.localeCompare(b.name),
  );
  const references = new Map<string, ColumnInfo['references']>();
  const ones = list.filter((r) => r.kind === 'one');
  for (const r of ones) references.set(r.name, { table: r.target.name, column: r.on[0]![1].name });
  for (const r of ones)
    for (const [mine, theirs] of r.on)
      if (!references.has(mine.name)) references.set(mine.name, { table: r.target.name, column: theirs.name });
  const relations = list.map((r) => ({
    name: r.name,
    kind: r.kind === 'one' ? ('many_to_one' as const) : ('one_to_many' as const),
    table: r.target.name,
    columns: r.on.map(([mine]) => mine.name),
    target_columns: r.on.map(([, theirs]) => theirs.name),
  }));
  return { relations, references };
}

/** The browser; `database` is the Database API's service, whose catalog it shares when there is one. */
export function createDataBrowser(p: Platform, database?: Pick<DatabaseService, 'catalog'>): DataBrowser {
  const schema = p.settings.get('database.data_schema');
  // The Database API's catalog when it exists (one cache, one refresh policy); the same class otherwise.
  const catalog = database?.catalog ?? new Catalog(p.db, { schema });
  const embedded = p.db.kind === 'embedded';
  const estimates = new Map<string, { rows: number; at: number }>();
  const maxBytes = () => p.settings.get('db.max_response_bytes');

  const core: BrowserCore = {
    p,
    catalog,
    via: (tx) => (embedded ? tx : undefined),
    async resolve(name, via) {
      if (typeof name !== 'string' || name === '') throw invalid('table', 'must be a table name');
      const { snap, table } = await catalog.table(name, via);
      if (!table) throw Errors.notFound(`No table '${name}' in the data schema '${catalog.schema}'.`);
      return { snap, table };
    },
    async build(name, body, via) {
      if (typeof name !== 'string' || name === '') throw invalid('table', 'must be a table name');
      const built = await catalog.build(
        name,
        via,
        (table) =>
          buildStatement(body(table), table, {
            maxLimit: MAX_LIMIT,
            limitFrom: "the data browser's bound",
            maxBytes: maxBytes(),
          }),
        {
          table: () => Errors.notFound(`No table '${name}' in the data schema '${catalog.schema}'.`),
          name: (e) =>
            invalid(
              e.path,
              e.detail ??
                `unknown ${e.what === 'relation' ? 'relation' : 'column'} '${e.name}' of table '${e.table ?? name}'`,
            ),
        },
      );
      return { st: built.value, snap: built.snap, table: built.table };
    },
    async write(tx, { st, snap, table }) {
      // On the embedded engine a savepoint keeps the transaction usable after a failed
      // statement, so a bad value can be traced to its column through the same session.
      const sp = embedded && tx !== p.db; // a savepoint needs a transaction block
      const run = async () => decodeRows(st.columns, (await tx.query<Row>(st.sql, st.params)).rows);
      try {
        return sp ? await underSavepoint(tx, run) : await run();
      } catch (err) {
        return failed(err, { st, snap, table }, embedded ? tx : p.db);
      }
    },
  };

  /** A statement's failure as the Database API answers it (mapDbError); an AppError as it is. */
  async function failed(
    err: unknown,
    { st, snap, table }: { st: Statement; snap: CatalogSnapshot; table: Table },
    probe: Queryable,
  ): Promise<never> {
    if (err instanceof AppError) throw err;
    throw await mapDbError(err, {
      statement: st,
      table,
      snap,
      catalog,
      probe,
      timeoutMs: p.settings.get('db.statement_timeout_ms'),
    });
  }

  /** Estimated rows of one table (cached a few seconds). */
  async function tableEstimate(table: Table): Promise<number> {
    const hit = estimates.get(table.name);
    if (hit && Date.now() - hit.at < ESTIMATE_TTL_MS) return hit.rows;
    const res = await p.db.query<{ estimate: number | null }>(`${ESTIMATE_SQL} AND c.relname = $2`, [
      catalog.schema,
      table.name,
    ]);
    const est = res.rows[0]?.estimate;
    const rows =
      est === null || est === undefined ? await explainRows(p.db, `SELECT 1 FROM ${table.quoted}`) : Number(est);
    estimates.set(table.name, { rows, at: Date.now() });
    return rows;
  }

  /** A primary key as eq filters; each key column present, not null and of its type; no other column. */
  function keyFilters(table: Table, key: unknown, path: string): Filter[] {
    if (!isObject(key))
      throw invalid(
        path,
        `must be an object of the primary key column${table.primaryKey.length > 1 ? 's' : ''} (${table.primaryKey.join(', ')})`,
      );
    for (const k of Object.keys(key)) {
      if (!table.primaryKey.includes(k))
        throw invalid(
          `${path}.${k}`,
          `not a primary key column of '${table.name}' (key: ${table.primaryKey.join(', ')})`,
        );
    }
    return table.primaryKey.map((name) => {
      const v = key[name];
      if (v === undefined || v === null) throw invalid(`${path}.${name}`, 'is required (a primary key column)');
      try {
        encodeValue(table.columns.get(name)!, v);
      } catch (e) {
        if (e instanceof ValueError) throw invalid(`${path}.${name}`, e.message);
        throw e;
      }
      return { field: name, op: 'eq', value: v };
    });
  }

  function requireKey(table: Table, action: string): void {
    if (table.primaryKey.length === 0) {
      throw invalid(
        'table',
        `'${table.name}' has no primary key, so rows cannot be ${action} here (browse, export and insert only); add a primary key to edit it`,
      );
    }
  }

  return {
    async tables() {
      const snap = await catalog.get();
      const res = await p.db.query<{ name: string; estimate: number | null }>(ESTIMATE_SQL, [catalog.schema]);
      const est = new Map(res.rows.map((r) => [r.name, r.estimate]));
      const out: TableInfo[] = [];
      for (const t of [...snap.tables.values()].sort((a, b) => a.name.localeCompare(b.name))) {
        const e = est.get(t.name);
        let rows: number;
        if (e === null || e === undefined) {
          // No statistics yet: ask the planner (planning only, nothing is scanned).
          rows = await explainRows(p.db, `SELECT 1 FROM ${t.quoted}`).catch(() => 0);
        } else rows = Number(e);
        const counted = await p.db.query<{ n: string | number }>(
          `SELECT count(*)::int8 AS n FROM (SELECT 1 FROM ${t.quoted} LIMIT ${LIST_EXACT_MAX + 1}) s`,
        );
        const n = Number(counted.rows[0]?.n ?? 0);
        const exact = n <= LIST_EXACT_MAX ? n : null;
        if (exact !== null) rows = exact;
        estimates.set(t.name, { rows, at: Date.now() });
        const { relations, references } = relationsOf(t);
        out.push({
          name: t.name,
          rows: exact,
          estimated_rows: rows,
          primary_key: [...t.primaryKey],
          columns: t.columnList.map((c) => ({
            name: c.name,
            type: c.fullType,
            nullable: !c.notNull,
            has_default: c.hasDefault,
            references: references.get(c.name) ?? null,
          })),
          relations,
        });
      }
      return out;
    },

    async select(name, q = {}) {
      if (!isObject(q)) throw invalid('query', 'must be an object {filters?, sort?, limit?, offset?, expand?}');
      const limit = q.limit ?? DEFAULT_LIMIT;
      if (typeof limit === 'number' && Number.isSafeInteger(limit) && limit > MAX_LIMIT)
        throw invalid('limit', `must be at most ${MAX_LIMIT}; page with offset`);
      const { filters, expand } = q;
      // The page is the query builder's statement (names against the catalog, operators, values,
      // limit, offset, and `expand` as the Database API reads it), in the sort asked for, then the key.
      const built = await core.build(name, (t) =>
        pageBody(t, { filters, sort: q.sort, limit, offset: q.offset ?? 0, expand }),
      );
      const { st, table } = built;
      const count = countStatements(table, filters);
      const filtered = Array.isArray(filters) && filters.length > 0;
      try {
        // The table's size decides between an exact count and an estimate (cached for a few
        // seconds); then the page and the count or estimate run side by side (two pool
        // connections on external PostgreSQL, one after the other on the embedded engine).
        const tableRows = await tableEstimate(table);
        const exact = tableRows <= EXACT_TOTAL_MAX;
        const [res, counted] = await Promise.all([
          // A page is bounded as the Database API's selects are (docs/database.md, "Answer size").
          p.db
            .atOnce([{ sql: st.sql, params: st.params }], { maxAnswerBytes: maxBytes() })
            .then((r) => r[0] as QueryResult<Row>),
          exact
            ? p.db
                .query<{ total: string | number }>(count.countSql, count.countParams)
                .then((c) => Number(c.rows[0]?.total ?? 0))
            : filtered
              ? // Never an unbounded count(*) on a big table: the planner's estimate of the filtered set.
                explainRows(p.db, count.estimateSql, count.countParams)
              : tableRows,
        ]);
        const { rows } = answerOf(st, res);
        const out: SelectResult = { rows, count: rows.length, estimated_total: counted };
        if (exact) out.total = counted;
        return out;
      } catch (err) {
        return failed(err, built, p.db);
      }
    },

    async insert(tx, name, data) {
      if (!isObject(data)) throw invalid('data', 'must be an object of column → value');
      const built = await core.build(name, () => ({ entity: name, action: 'insert', data }) as QueryBody, core.via(tx));
      const rows = await core.write(tx, built);
      return rows[0]!;
    },

    async update(tx, name, key, data) {
      const via = core.via(tx);
      const { table } = await core.resolve(name, via);
      requireKey(table, 'updated');
      if (!isObject(data) || Object.keys(data).length === 0)
        throw invalid('data', 'must be an object of column → new value with at least one column');
      const built = await core.build(
        name,
        (t) => ({ entity: name, action: 'update', data, filters: keyFilters(t, key, 'key') }) as QueryBody,
        via,
      );
      const rows = await core.write(tx, built);
      if (rows.length === 0) throw Errors.notFound(`No row of '${name}' has this key.`);
      return rows[0]!;
    },

    async row(tx, name, key) {
      const via = core.via(tx);
      const { table } = await core.resolve(name, via);
      requireKey(table, 'updated');
      const built = await core.build(
        name,
        (t) => ({ entity: name, action: 'select', filters: keyFilters(t, key, 'key'), limit: 1 }) as QueryBody,
        via,
      );
      return (await core.write(tx, built))[0] ?? null;
    },

    async deleteRows(tx, name, keys) {
      const via = core.via(tx);
      const { table } = await core.resolve(name, via);
      requireKey(table, 'deleted');
      if (!Array.isArray(keys) || keys.length === 0) throw invalid('keys', 'must be a non-empty array of primary keys');
      if (keys.length > MAX_DELETE_KEYS) throw invalid('keys', `at most ${MAX_DELETE_KEYS} rows per request`);
      const filters = keys.map((k, i) => keyFilters(table, k, `keys[${i}]`));
      const fields = [...table.primaryKey];
      if (table.primaryKey.length === 1) {
        // One statement whatever the number of keys: `pk = ANY($1)` (one array parameter).
        const [pk] = fields;
        const values = filters.map((f) => f[0]!.value);
        const built = await core.build(
          name,
          () =>
            ({
              entity: name,
              action: 'delete',
              fields,
              filters: [{ field: pk!, op: 'in', value: values }],
            }) as QueryBody,
          via,
        );
        return (await core.write(tx, built)).length;
      }
      // Composite key: one statement per key, all in the caller's transaction.
      let count = 0;
      for (const f of filters) {
        const built = await core.build(
          name,
          () => ({ entity: name, action: 'delete', fields, filters: f }) as QueryBody,
          via,
        );
        count += (await core.write(tx, built)).length;
      }
      return count;
    },

    exportCsv: (name, q, formulas) => exportCsv(core, name, q ?? {}, formulas),
    importCsv: (tx, name, csv) => importCsv(core, tx, name, csv),
  };
}
