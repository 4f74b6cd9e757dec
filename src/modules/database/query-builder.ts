/**
 * One Database API request → one parameterized statement. Every identifier is
 * the catalog's own quoted form of a name found there (`Column.quoted`, quoted once
 * per catalog load); every value is a bind parameter; the only text spliced in
 * comes from the catalog (type names) or from this file (keywords, operators).
 */
import type { Column, Table } from './catalog-types';
import { DbErrors } from './errors';
import { ACTIONS, DIRECTIONS, OPERATORS, type Action, type Operator, type QueryBody } from './model';
import { boundAnswer, castParam, encodeList, encodeValue, ValueError } from './value-codec';
import { MAX_BIND_PARAMS } from '../../db/wire-writer';

/** A column or table name the catalog does not know (the caller may refresh the catalog and retry). */
export class UnknownName extends Error {
  constructor(
    readonly path: string,
    readonly name: string,
    readonly what: 'field' | 'entity',
  ) {
    super(`${path}: unknown ${what} '${name}'`);
  }
}

export interface Statement {
  sql: string;
  params: (string | number | null)[];
  /** Columns of the result rows, for decoding. */
  columns: Column[];
  /** For each parameter, the column whose type it is cast to (null for limit/offset). */
  paramColumns: (Column | null)[];
  /** For each parameter, whether it is an array of the column type (in/not_in). */
  paramIsList: boolean[];
  /** like/ilike patterns: parameter index and request path, to name the one Postgres refuses. */
  patterns: { param: number; path: string }[];
  /** select with total: the count statement (same filters, same params prefix). */
  countSql?: string;
  countParams?: (string | number | null)[];
}

const TEXT_OPS = new Set<Operator>(['like', 'ilike']);
const ORDER_OPS = new Set<Operator>(['gt', 'gte', 'lt', 'lte']);
const SQL_OP: Record<string, string> = {
  eq: '=',
  neq: '<>',
  gt: '>',
  gte: '>=',
  lt: '<',
  lte: '<=',
  like: 'LIKE',
  ilike: 'ILIKE',
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keys a request may carry, per action (others are refused with a 400 naming them). */
const ALLOWED: Record<Action, Set<string>> = {
  select: new Set(['entity', 'action', 'fields', 'filters', 'sort', 'limit', 'offset', 'total', 'transaction_id']),
  insert: new Set(['entity', 'action', 'fields', 'data', 'transaction_id']),
  update: new Set(['entity', 'action', 'fields', 'filters', 'data', 'transaction_id']),
  delete: new Set(['entity', 'action', 'fields', 'filters', 'transaction_id']),
};

function column(table: Table, name: unknown, path: string): Column {
  if (typeof name !== 'string' || name === '')
    throw DbErrors.invalid(path, 'must be a column name (a non-empty string)');
  const col = table.columns.get(name);
  if (!col) throw new UnknownName(path, name, 'field');
  return col;
}

/** Bind parameters of one statement (exported for the admin data browser's keyset export, docs/admin.md). */
export class Params {
  readonly list: (string | number | null)[] = [];
  readonly columns: (Column | null)[] = [];
  readonly isList: boolean[] = [];
  readonly patterns: { param: number; path: string }[] = [];
  /** The part of the request the values come from, for the error past the limit. */
  from: 'data' | 'filters' = 'data';
  add(v: string | number | null, col: Column | null = null, isList = false): number {
    // PostgreSQL's limit (its protocol counts them in 16 bits): refused here, alike on both engines.
    if (this.list.length >= MAX_BIND_PARAMS) throw DbErrors.tooManyValues(this.from);
    this.list.push(v);
    this.columns.push(col);
    this.isList.push(isList);
    return this.list.length;
  }
  statement(sql: string, columns: Column[]): Statement {
    return {
      sql,
      params: this.list,
      columns,
      paramColumns: this.columns,
      paramIsList: this.isList,
      patterns: this.patterns,
    };
  }
}

function encode(col: Column, v: unknown, path: string): string | null {
  try {
    return encodeValue(col, v);
  } catch (e) {
    if (e instanceof ValueError) throw DbErrors.column(col.name, e.message, undefined, path);
    throw e;
  }
}

export function where(table: Table, filters: unknown, params: Params): string {
  params.from = 'filters';
  if (filters === undefined) return '';
  if (!Array.isArray(filters)) throw DbErrors.invalid('filters', 'must be an array of {field, op, value}');
  const parts = filters.map((f, i) => {
    const path = `filters[${i}]`;
    if (!isObject(f)) throw DbErrors.invalid(path, 'must be an object {field, op, value}');
    for (const k of Object.keys(f))
      if (k !== 'field' && k !== 'op' && k !== 'value')
        throw DbErrors.invalid(`${path}.${k}`, 'unknown key; a filter has field, op and value');
    const op = f.op;
    if (typeof op !== 'string' || !(OPERATORS as readonly string[]).includes(op)) {
      throw DbErrors.invalid(`${path}.op`, `unknown operator; use one of ${OPERATORS.join(', ')}`);
    }
    const col = column(table, f.field, `${path}.field`);
    const q = col.quoted;
    const v = f.value;
    const value = filterValue(col, op as Operator, v, i);
    switch (op as Operator) {
      case 'is_null':
        return `${q} IS ${v ? '' : 'NOT '}NULL`;
      case 'in':
      case 'not_in': {
        const n = params.add(value, col, true);
        return op === 'in' ? `${q} = ANY(${castParam(n, col, true)})` : `${q} <> ALL(${castParam(n, col, true)})`;
      }
      case 'like':
      case 'ilike': {
        const n = params.add(value, col);
        params.patterns.push({ param: n - 1, path: `${path}.value` });
        return `${q} ${SQL_OP[op]} $${n}::text`;
      }
      default:
        return `${q} ${SQL_OP[op]} ${castParam(params.add(value, col), col)}`;
    }
  });
  return parts.length ? ' WHERE ' + parts.join(' AND ') : '';
}

/**
 * The bind parameter of filter `i` on `col` with operator `op` (null for is_null, which has none),
 * or the 400 that names what is wrong with it.
 */
function filterValue(col: Column, op: Operator, v: unknown, i: number): string | null {
  // The request path (`filters[i]`) is spelled out in each refusal, so an accepted value makes no string.
  switch (op) {
    case 'is_null':
      if (typeof v !== 'boolean') throw DbErrors.invalid(`filters[${i}].value`, 'is_null takes true or false');
      return null;
    case 'in':
    case 'not_in': {
      if (!Array.isArray(v) || v.length === 0)
        throw DbErrors.invalid(`filters[${i}].value`, `${op} takes a non-empty array`);
      if (col.isArray || col.kind === 'json')
        throw DbErrors.invalid(
          `filters[${i}].op`,
          `${op} is not available for ${col.isArray ? 'array' : 'json'} column '${col.name}'`,
        );
      if (v.some((x) => x === null))
        throw DbErrors.invalid(`filters[${i}].value`, `${op} values cannot be null; add an is_null filter instead`);
      // One value per element: a nested array would become another dimension of the array parameter.
      if (v.some((x) => typeof x === 'object'))
        throw DbErrors.invalid(
          `filters[${i}].value`,
          `${op} takes a flat array of values (strings, numbers or booleans); nested arrays and objects are not values`,
        );
      try {
        return encodeList(col, v);
      } catch (e) {
        if (e instanceof ValueError) throw DbErrors.column(col.name, e.message, undefined, `filters[${i}].value`);
        throw e;
      }
    }
    default: {
      if (v === null || v === undefined)
        throw DbErrors.invalid(`filters[${i}].value`, `${op} needs a value; to match NULL use is_null`);
      if (TEXT_OPS.has(op)) {
        if (col.kind !== 'text' || col.isArray)
          throw DbErrors.invalid(`filters[${i}].op`, `${op} applies to text columns; '${col.name}' is not one`);
        if (typeof v !== 'string')
          throw DbErrors.invalid(`filters[${i}].value`, `${op} takes a pattern string (% and _ are wildcards)`);
        return v;
      }
      if (col.kind === 'json' && (ORDER_OPS.has(op) || col.castType === 'json')) {
        throw DbErrors.invalid(`filters[${i}].op`, `${op} is not available for json column '${col.name}'`);
      }
      try {
        return encodeValue(col, v);
      } catch (e) {
        if (e instanceof ValueError) throw DbErrors.column(col.name, e.message, undefined, `filters[${i}].value`);
        throw e;
      }
    }
  }
}

function returning(table: Table, fields: unknown): Column[] {
  if (fields === undefined) return table.columnList;
  if (!Array.isArray(fields)) throw DbErrors.invalid('fields', 'must be an array of column names');
  if (fields.length === 0) throw DbErrors.invalid('fields', 'must name at least one column (omit it for all columns)');
  const seen = new Set<string>();
  const cols: Column[] = [];
  fields.forEach((f, i) => {
    const c = column(table, f, `fields[${i}]`);
    if (!seen.has(c.name)) {
      cols.push(c);
      seen.add(c.name);
    }
  });
  return cols;
}

export function orderBy(table: Table, sort: unknown): string {
  if (sort === undefined) return '';
  if (!Array.isArray(sort)) throw DbErrors.invalid('sort', 'must be an array of {field, direction}');
  const parts = sort.map((s, i) => {
    const path = `sort[${i}]`;
    if (!isObject(s)) throw DbErrors.invalid(path, 'must be an object {field, direction}');
    for (const k of Object.keys(s))
      if (k !== 'field' && k !== 'direction')
        throw DbErrors.invalid(`${path}.${k}`, 'unknown key; a sort item has field and direction');
    const dir = s.direction === undefined ? 'asc' : typeof s.direction === 'string' ? s.direction.toLowerCase() : '';
    if (!(DIRECTIONS as readonly string[]).includes(dir))
      throw DbErrors.invalid(`${path}.direction`, 'must be asc or desc');
    const col = column(table, s.field, `${path}.field`);
    // Table-qualified: a bare name would resolve to the select list's alias, which for dates,
    // timestamps and arrays is their text form (year 10000 before 9999, no index use).
    return `${table.quoted}.${col.quoted} ${dir === 'desc' ? 'DESC' : 'ASC'}`;
  });
  return parts.length ? ' ORDER BY ' + parts.join(', ') : '';
}

function assignments(table: Table, data: unknown, path: string): [Column, unknown][] {
  if (!isObject(data)) throw DbErrors.invalid(path, 'must be an object of column → value');
  return Object.entries(data).map(([k, v]) => [column(table, k, `${path}.${k}`), v]);
}

function nonNegativeInt(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw DbErrors.invalid(path, 'must be a whole number ≥ 0');
  return v;
}

/**
 * Validate the request against the table and build the statement. `returning: false`
 * (a user role that may read no column of the table) leaves RETURNING out of writes:
 * they answer no rows, and `count` is the number of rows written.
 */
export function buildStatement(
  body: QueryBody,
  table: Table,
  opts: { maxLimit: number; returning?: boolean; maxBytes?: number },
): Statement {
  const st = build(body, table, opts);
  return body.action === 'select' ? st : bounded(st, opts.maxBytes);
}

/**
 * A write whose RETURNING rows make the answer, bounded to `maxBytes` (db.max_response_bytes)
 * by the database itself (value-codec.ts, `boundAnswer`), so a write refused for its answer's
 * size changes nothing; one without rows (a role that may read nothing) or without a bound
 * stays as it is. A select's rows are bounded as they are read instead, at no cost to the
 * statement (the engines' `maxAnswerBytes`, docs/database.md "Answer size").
 */
export function bounded(st: Statement, maxBytes: number | undefined): Statement {
  if (maxBytes === undefined || !st.columns.length) return st;
  st.sql = boundAnswer(st.sql, st.columns, maxBytes);
  return st;
}

function build(body: QueryBody, table: Table, opts: { maxLimit: number; returning?: boolean }): Statement {
  const action = body.action as Action;
  if (!(ACTIONS as readonly string[]).includes(action))
    throw DbErrors.invalid('action', `unknown action; use one of ${ACTIONS.join(', ')}`);
  for (const k of Object.keys(body)) {
    if (!ALLOWED[action].has(k))
      throw DbErrors.invalid(k, ALLOWED.select.has(k) || k === 'data' ? `not used by ${action}` : 'unknown field');
  }
  const t = table.quoted;
  const params = new Params();
  const noRows = opts.returning === false && action !== 'select';
  const cols = noRows ? [] : returning(table, body.fields);
  const list = cols === table.columnList ? table.selectAll : cols.map((c) => c.select).join(', ');
  const ret = noRows ? '' : ` RETURNING ${list}`;

  switch (action) {
    case 'select': {
      const w = where(table, body.filters, params);
      const o = orderBy(table, body.sort);
      const limit = limitOf(body, opts.maxLimit);
      const offset = body.offset === undefined ? 0 : nonNegativeInt(body.offset, 'offset');
      if (body.total !== undefined && typeof body.total !== 'boolean')
        throw DbErrors.invalid('total', 'must be true or false');
      const filterParams = params.list.slice();
      const sql = `SELECT ${list} FROM ${t}${w}${o} LIMIT $${params.add(limit)} OFFSET $${params.add(offset)}`;
      const st = params.statement(sql, cols);
      if (body.total)
        Object.assign(st, { countSql: `SELECT count(*)::int8 AS total FROM ${t}${w}`, countParams: filterParams });
      return st;
    }
    case 'insert': {
      const rows = Array.isArray(body.data) ? body.data : body.data === undefined ? undefined : [body.data];
      if (!rows) throw DbErrors.invalid('data', 'insert needs data: an object or a non-empty array of objects');
      if (rows.length === 0) throw DbErrors.invalid('data', 'must not be an empty array');
      const parsed = rows.map((r, i) => assignments(table, r, Array.isArray(body.data) ? `data[${i}]` : 'data'));
      const names: string[] = [];
      for (const r of parsed) for (const [c] of r) if (!names.includes(c.name)) names.push(c.name);
      if (names.length === 0) {
        if (rows.length > 1) throw DbErrors.invalid('data', 'each row of a bulk insert needs at least one column');
        return params.statement(`INSERT INTO ${t} DEFAULT VALUES${ret}`, cols);
      }
      // Columns a row leaves out take their DEFAULT, as in a single-row insert.
      const tuples = parsed.map((r, i) => {
        const byName = new Map(r.map(([c, v]) => [c.name, [c, v] as const]));
        return (
          '(' +
          names
            .map((n) => {
              const cv = byName.get(n);
              if (!cv) return 'DEFAULT';
              return castParam(params.add(encode(cv[0], cv[1], `data[${i}].${n}`), cv[0]), cv[0]);
            })
            .join(', ') +
          ')'
        );
      });
      const sql = `INSERT INTO ${t} (${names.map((n) => table.columns.get(n)!.quoted).join(', ')}) VALUES ${tuples.join(', ')}${ret}`;
      return params.statement(sql, cols);
    }
    case 'update': {
      if (body.data === undefined) throw DbErrors.invalid('data', 'update needs data: an object of column → new value');
      if (Array.isArray(body.data)) throw DbErrors.invalid('data', 'update takes one object of column → new value');
      const sets = assignments(table, body.data, 'data');
      if (sets.length === 0) throw DbErrors.invalid('data', 'must set at least one column');
      if (!Array.isArray(body.filters) || body.filters.length === 0) throw DbErrors.filtersRequired('update');
      const set = sets
        .map(([c, v]) => `${c.quoted} = ${castParam(params.add(encode(c, v, `data.${c.name}`), c), c)}`)
        .join(', ');
      const w = where(table, body.filters, params);
      return params.statement(`UPDATE ${t} SET ${set}${w}${ret}`, cols);
    }
    case 'delete': {
      if (!Array.isArray(body.filters) || body.filters.length === 0) throw DbErrors.filtersRequired('delete');
      const w = where(table, body.filters, params);
      return params.statement(`DELETE FROM ${t}${w}${ret}`, cols);
    }
  }
}

function limitOf(body: QueryBody, maxLimit: number): number {
  const limit = body.limit === undefined ? 100 : nonNegativeInt(body.limit, 'limit');
  if (limit > maxLimit)
    throw DbErrors.invalid('limit', `must be at most ${maxLimit} (setting db.max_limit); page with offset`);
  return limit;
}
