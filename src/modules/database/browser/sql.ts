/**
 * SQL pieces of the admin data browser (docs/admin.md "Data browser"), built from the
 * Database API's own parts: the catalog's quoted names, the query builder's WHERE and
 * sort checks, the value codec's casts and bind parameters. Nothing here takes a name
 * the catalog did not give, nor splices a value.
 */
import type { Queryable } from '../../../db/engine';
import { Errors, type AppError } from '../../../http/errors';
import type { Column, Table } from '../catalog';
import { orderBy, Params, where, type Statement } from '../query-builder';
import { castParam, encodeValue, ValueError } from '../value-codec';
import type { Sort } from '../model';
import type { Row } from './core';

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** 400 `validation_error` naming the field (`details.fields[field]`). */
export const invalid = (field: string, problem: string): AppError =>
  Errors.validation(`${field}: ${problem}`, { [field]: problem });

// Size of each table of the schema (or of one): the planner's own rule, reltuples/relpages
// scaled to the current number of pages; NULL when there are no statistics yet (never
// vacuumed or analyzed: on the embedded engine, which has no autovacuum, until an ANALYZE).
export const ESTIMATE_SQL = `
SELECT c.relname AS name,
       CASE WHEN c.relkind IN ('r', 'm') AND pg_catalog.pg_relation_size(c.oid) = 0 THEN 0
            WHEN c.reltuples >= 0 AND c.relpages > 0 AND c.relkind IN ('r', 'm')
            THEN round(c.reltuples / c.relpages * (pg_catalog.pg_relation_size(c.oid) / current_setting('block_size')::float8))
       END::float8 AS estimate
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')`;

// Each column of a foreign key in the data schema, with the table and column it references
// (both in the same schema: the admin reaches only that one).
export const FOREIGN_KEYS_SQL = `
SELECT src.relname AS table_name, a.attname AS column_name, dst.relname AS ref_table, fa.attname AS ref_column
  FROM pg_catalog.pg_constraint con
  JOIN pg_catalog.pg_class src ON src.oid = con.conrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = src.relnamespace
  JOIN pg_catalog.pg_class dst ON dst.oid = con.confrelid
  JOIN pg_catalog.pg_namespace dn ON dn.oid = dst.relnamespace
  CROSS JOIN LATERAL unnest(con.conkey, con.confkey) AS k(attnum, fattnum)
  JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
  JOIN pg_catalog.pg_attribute fa ON fa.attrelid = con.confrelid AND fa.attnum = k.fattnum
 WHERE con.contype = 'f' AND n.nspname = $1 AND dn.nspname = $1`;

/** Rows of the top plan node of `EXPLAIN (FORMAT JSON) <sql>`. */
export async function explainRows(db: Queryable, sql: string, params: unknown[] = []): Promise<number> {
  const res = await db.query<Record<string, unknown>>(`EXPLAIN (FORMAT JSON) ${sql}`, params);
  let plan = Object.values(res.rows[0] ?? {})[0];
  if (typeof plan === 'string') plan = JSON.parse(plan);
  const rows = (plan as { Plan?: { 'Plan Rows'?: number } }[] | undefined)?.[0]?.Plan?.['Plan Rows'];
  return typeof rows === 'number' ? Math.round(rows) : 0;
}

/**
 * The sort asked for, then the primary key columns it does not name, so pages are
 * stable (rows with equal sort values keep one order from page to page).
 */
export function withKeyOrder(table: Table, sort: unknown): unknown {
  if (sort !== undefined && !Array.isArray(sort)) return sort; // the builder names the problem
  const items = (sort ?? []) as unknown[];
  const named = new Set(items.map((s) => (isObject(s) ? s.field : undefined)));
  const extra = table.primaryKey.filter((c) => !named.has(c)).map((field) => ({ field, direction: 'asc' }));
  return items.length || extra.length ? [...items, ...extra] : undefined;
}

export type KeyPart = { col: Column; desc: boolean };

/** The sort items (already checked by the builder) as columns and directions. */
export function keyParts(table: Table, sort: unknown): KeyPart[] {
  return ((sort ?? []) as Sort[]).map((s) => ({
    col: table.columns.get(s.field)!,
    desc: String(s.direction ?? 'asc').toLowerCase() === 'desc',
  }));
}

/**
 * ORDER BY on the table's own columns. Qualified, so that a column read through an
 * expression (timestamps are selected as ISO text) is ordered by its value, not by the
 * text of the select list's alias — the keyset condition compares values too.
 */
export function orderByColumns(table: Table, parts: KeyPart[]): string {
  return parts.length
    ? ' ORDER BY ' + parts.map((k) => `${table.quoted}.${k.col.quoted} ${k.desc ? 'DESC' : 'ASC'}`).join(', ')
    : '';
}

/**
 * The page statement of `select`: the builder's WHERE (operators, casts, bind
 * parameters) with ORDER BY on the table's own columns (see orderByColumns) and the
 * primary key as tie-breaker; plus the count and the estimate over the same filters.
 */
export function pageStatement(
  table: Table,
  q: { filters?: unknown; sort?: unknown; limit: number; offset: number },
): { st: Statement; countSql: string; countParams: unknown[]; estimateSql: string } {
  const params = new Params();
  const w = where(table, q.filters, params);
  const countParams = params.list.slice();
  const sort = withKeyOrder(table, q.sort);
  orderBy(table, sort); // the builder stays the judge of a sort item
  const sql = `SELECT ${table.selectAll} FROM ${table.quoted}${w}${orderByColumns(table, keyParts(table, sort))} LIMIT $${params.add(q.limit)} OFFSET $${params.add(q.offset)}`;
  return {
    st: params.statement(sql, table.columnList),
    countSql: `SELECT count(*)::int8 AS total FROM ${table.quoted}${w}`,
    countParams,
    estimateSql: `SELECT 1 FROM ${table.quoted}${w}`,
  };
}

/**
 * Rows after `last` in the order of `parts` (ASC puts NULLs last, DESC first, as
 * Postgres does by default). With every key column NOT NULL and one direction, a row
 * comparison the index can serve: `(a, b) > ($1, $2)`.
 */
export function keysetCondition(table: Table, parts: KeyPart[], last: Row, params: Params): string {
  const ref = (k: KeyPart) => `${table.quoted}.${k.col.quoted}`;
  const bind = (k: KeyPart): string | null => {
    const v = last[k.col.name];
    if (v === null || v === undefined) return null;
    try {
      return castParam(params.add(encodeValue(k.col, v), k.col), k.col);
    } catch (e) {
      if (e instanceof ValueError) throw new Error(`export: cannot page on column '${k.col.name}': ${e.message}`);
      throw e;
    }
  };
  const simple = parts.every((k) => k.col.notNull) && parts.every((k) => k.desc === parts[0]!.desc);
  if (simple) {
    const values = parts.map(bind);
    const op = parts[0]!.desc ? '<' : '>';
    return parts.length === 1
      ? `${ref(parts[0]!)} ${op} ${values[0]}`
      : `(${parts.map(ref).join(', ')}) ${op} (${values.join(', ')})`;
  }
  // after(i) = strictly-after on key i, or equal on key i and after(i + 1).
  let cond = 'FALSE';
  for (let i = parts.length - 1; i >= 0; i--) {
    const k = parts[i]!;
    const c = ref(k);
    const v = bind(k);
    let after: string;
    let equal: string;
    if (v === null) {
      after = k.desc ? `${c} IS NOT NULL` : 'FALSE';
      equal = `${c} IS NULL`;
    } else {
      after = k.desc ? `${c} < ${v}` : `(${c} > ${v} OR ${c} IS NULL)`;
      equal = `${c} = ${v}`;
    }
    cond = cond === 'FALSE' ? after : `${after === 'FALSE' ? '' : `${after} OR `}(${equal} AND (${cond}))`;
  }
  return cond;
}
