/**
 * SQL pieces of the admin data browser (docs/admin.md "Data browser"), built from the
 * Database API's own parts: the catalog's quoted names, the query builder's WHERE and
 * sort checks, the value codec's casts and bind parameters. Nothing here takes a name
 * the catalog did not give, nor splices a value.
 */
import type { Queryable } from '../../../db/engine';
import { Errors, type AppError } from '../../../http/errors';
import type { Column, Table } from '../catalog';
import { Params, where } from '../query-builder';
import { castParam, encodeValue, ValueError } from '../value-codec';
import type { QueryBody, Sort } from '../model';
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
  return ((sort ?? []) as Sort[]).map((s, i) => {
    const col = table.columns.get(s.field);
    // A path through a relation (`author_id.name`) sorts a select, not the export's keyset batches.
    if (!col)
      throw invalid(`sort[${i}].field`, `the CSV export sorts by columns of '${table.name}' only, not by a path`);
    return { col, desc: String(s.direction ?? 'asc').toLowerCase() === 'desc' };
  });
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
 * The Database API request of `select`'s page (the builder makes its statement): the
 * filters, the sort asked for then the primary key, the page, and `expand` when asked.
 */
export function pageBody(
  table: Table,
  q: { filters?: unknown; sort?: unknown; limit: unknown; offset: unknown; expand?: unknown },
): QueryBody {
  return {
    entity: table.name,
    action: 'select',
    ...(q.filters === undefined ? {} : { filters: q.filters }),
    ...(q.expand === undefined ? {} : { expand: q.expand }),
    sort: withKeyOrder(table, q.sort),
    limit: q.limit,
    offset: q.offset,
  } as QueryBody;
}

/**
 * The count and the estimate of `select`'s rows: the builder's WHERE (operators, casts,
 * bind parameters) over the table alone; the page itself is the builder's statement.
 */
export function countStatements(
  table: Table,
  filters: unknown,
): { countSql: string; countParams: unknown[]; estimateSql: string } {
  const params = new Params();
  const w = where(table, filters, params);
  return {
    countSql: `SELECT count(*)::int8 AS total FROM ${table.quoted}${w}`,
    countParams: params.list,
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
