/**
 * One Database API request → one parameterized statement. Every identifier is
 * the catalog's own quoted form of a name found there (`Column.quoted`, quoted once
 * per catalog load); every value is a bind parameter; the only text spliced in
 * comes from the catalog (type names) or from this file (keywords, operators).
 */
import type { Column, Relation, Table } from './catalog-types';
import { DbErrors } from './errors';
import {
  ACTIONS,
  AGGREGATE_FNS,
  type QueryResultData,
  DIRECTIONS,
  OPERATORS,
  type Action,
  type AggregateFn,
  type Operator,
  type QueryBody,
  QUERY_BOUNDS,
} from './model';
import {
  boundAnswer,
  castParam,
  decodeExpand,
  decodeRows,
  encodeList,
  encodeValue,
  jsonValue,
  selectExpr,
  ValueError,
} from './value-codec';
import { quoteIdent, type QueryResult } from '../../db/engine';
import { AppError } from '../../http/errors';
import { MAX_BIND_PARAMS } from '../../db/wire-writer';

/** A column, table or relation name the catalog does not know (the caller may refresh the catalog and retry). */
export class UnknownName extends Error {
  constructor(
    readonly path: string,
    readonly name: string,
    readonly what: 'field' | 'entity' | 'relation',
    /** The table the name was looked up in (a related table's, for a name inside `expand` or a path). */
    readonly table?: string,
    /** The whole explanation, when the service's default ("unknown field … of entity …") does not fit. */
    readonly detail?: string,
  ) {
    super(`${path}: unknown ${what} '${name}'`);
  }
}

/**
 * What the caller may read (docs/database.md, "Relations" and "Users' own data"): asked for
 * every table and column a statement reads, so a refusal (403) names it. Without it (the
 * admin data browser) everything may be read.
 */
export interface Access {
  /** Throw the refusal when the caller may not read `column` of `table` (without a column: the table at all). */
  read(table: Table, column?: string): void;
  /** The columns of `table` the caller may read, for a relation without `fields`. */
  readable(table: Table): Column[];
}

/** A decoded part of an answer: array columns come as their text form inside JSON (see `jsonValue`). */
export interface NestedDecode {
  arrays: Column[];
  relations: { name: string; many: boolean; decode: NestedDecode }[];
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
  /** select with expand: how to finish the rows' `expand` objects (value-codec.ts, `decodeExpand`). */
  expand?: NestedDecode;
  /**
   * total asked: the count is a column of the one statement (`TOTAL_COLUMN`, beside each row's
   * `ROW_COLUMN`; one row of nulls but the count when the page is empty): `counted`.
   */
  totalInRows?: boolean;
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
  select: new Set([
    'entity',
    'action',
    'fields',
    'filters',
    'sort',
    'limit',
    'offset',
    'total',
    'expand',
    'transaction_id',
  ]),
  insert: new Set(['entity', 'action', 'fields', 'data', 'transaction_id']),
  update: new Set(['entity', 'action', 'fields', 'filters', 'data', 'transaction_id']),
  delete: new Set(['entity', 'action', 'fields', 'filters', 'transaction_id']),
  aggregate: new Set([
    'entity',
    'action',
    'group_by',
    'aggregates',
    'filters',
    'having',
    'sort',
    'limit',
    'offset',
    'total',
    'transaction_id',
  ]),
};
const KNOWN = new Set(Object.values(ALLOWED).flatMap((s) => [...s]));

const {
  groupDepth: MAX_GROUP_DEPTH,
  filterItems: MAX_FILTER_ITEMS,
  expandDepth: MAX_EXPAND_DEPTH,
  relations: MAX_RELATIONS,
  pathHops: MAX_PATH_HOPS,
  aggregates: MAX_AGGREGATES,
  expandLimit: EXPAND_DEFAULT_LIMIT,
  expandedRows: MAX_EXPANDED_ROWS,
} = QUERY_BOUNDS;
/** Result columns of the statement's own (never a column name a table could clash with in practice). */
export const EXPAND_COLUMN = 'basalt expand';
export const TOTAL_COLUMN = 'basalt total';
export const ROW_COLUMN = 'basalt n';
const ROW_NUMBER = quoteIdent(ROW_COLUMN);

/** What one statement is built with: its parameters, the caller's access, and the request-wide counts. */
class Ctx {
  private aliases = 0;
  relations = 0;
  /** The related rows `expand` may put in the answer at most, from the limits (MAX_EXPANDED_ROWS). */
  expandedRows = 0;
  filterItems = 0;
  /**
   * aggregate: many-to-one paths from the entity read through LEFT JOINs of its FROM (one per
   * path, however often named), not a subquery per row: grouping 100,000 rows by a related
   * column is then a hash join. At most one related row per row (a foreign key refers to a
   * unique key), none when it is hidden or absent: the same values as the subquery's.
   */
  joined?: { root: Scope; joins: string[]; aliases: Map<string, string> };
  constructor(
    readonly params: Params,
    readonly maxLimit: number,
    readonly access?: Access,
    /** What sets `maxLimit`, named in the 400 past it. */
    readonly limitFrom = 'setting db.max_limit',
  ) {}
  alias(): string {
    return `"basalt ${++this.aliases}"`;
  }
  read(table: Table, column?: string): void {
    this.access?.read(table, column);
  }
}

/** A table as the statement reads it: `ref` is its alias (or its quoted name at the top). */
interface Scope {
  table: Table;
  ref: string;
}

const top = (table: Table): Scope => ({ table, ref: table.quoted });

function column(table: Table, name: unknown, path: string): Column {
  if (typeof name !== 'string' || name === '')
    throw DbErrors.invalid(path, 'must be a column name (a non-empty string)');
  const col = table.columns.get(name);
  if (!col) throw new UnknownName(path, name, 'field', table.name);
  return col;
}

/** A column the caller reads: its grant first (an unknown name answers like an ungranted one for users). */
function readColumn(ctx: Ctx, table: Table, name: unknown, path: string): Column {
  if (typeof name !== 'string' || name === '')
    throw DbErrors.invalid(path, 'must be a column name (a non-empty string)');
  ctx.read(table, name);
  return column(table, name, path);
}

/**
 * Relation `name` of `table`, its tables and key columns checked against the caller's access.
 * `whole`: the dotted path it is a hop of, quoted whole in the refusal (a client's string is
 * only ever quoted as sent).
 */
function relationOf(ctx: Ctx, table: Table, name: string, path: string, whole?: string): Relation {
  const rel = table.relations.get(name);
  if (!rel) {
    // Only the relations the caller may follow: a relation's name holds its table's and its
    // key column's, which a key's whitelist or a role's grants would otherwise give away.
    const names = [...table.relations.values()]
      .filter((r) => mayFollow(ctx.access, table, r))
      .map((r) => r.name)
      .sort();
    const list = names.length
      ? `its relations: ${names.join(', ')}`
      : 'it has no relation you may follow (no foreign key to or from a table you may read)';
    throw new UnknownName(
      path,
      name,
      'relation',
      table.name,
      whole === undefined
        ? `'${name}' is no relation of entity '${table.name}'; ${list}`
        : `unknown field '${whole}': no column of that name, and no such path through the relations of entity '${table.name}' (${list})`,
    );
  }
  follow(ctx.access, table, rel);
  return rel;
}

/** The related table, and the key columns the join reads on both sides: the refusal names the first not granted. */
function follow(access: Access | undefined, table: Table, rel: Relation): void {
  if (!access) return;
  access.read(rel.target);
  for (const [mine, theirs] of rel.on) {
    access.read(table, mine.name);
    access.read(rel.target, theirs.name);
  }
}

/**
 * Whether a caller with `access` (none: everything) may follow `rel` of `table`: what the
 * Database API takes in `expand` and paths, and what `basalt types` lists (types.ts).
 */
export function mayFollow(access: Access | undefined, table: Table, rel: Relation): boolean {
  try {
    follow(access, table, rel);
    return true;
  } catch (e) {
    if (e instanceof AppError) return false;
    throw e;
  }
}

/** `alias` (the related table) joined to `from` by the relation's key columns. */
function joinOn(rel: Relation, from: Scope, alias: string): string {
  return rel.on.map(([mine, theirs]) => `${alias}.${theirs.quoted} = ${from.ref}.${mine.quoted}`).join(' AND ');
}

/** A field of a filter, sort or group: a column, or a dotted path through relations. */
interface Resolved {
  col: Column;
  /** The value's SQL: a column reference, or a scalar subquery along many-to-one relations. */
  expr: string;
  /** A path through a one-to-many relation: the condition holds for at least one related row. */
  exists?: { from: string; where: string };
}

function resolve(ctx: Ctx, scope: Scope, name: unknown, path: string, manyAllowed: boolean): Resolved {
  if (typeof name !== 'string' || !name.includes('.') || scope.table.columns.has(name)) {
    const col = readColumn(ctx, scope.table, name, path);
    return { col, expr: `${scope.ref}.${col.quoted}` };
  }
  const parts = name.split('.');
  if (parts.length - 1 > MAX_PATH_HOPS)
    throw DbErrors.invalid(path, `a path follows at most ${MAX_PATH_HOPS} relations`);
  let cur = scope;
  let from = '';
  let corr = '';
  let many = false;
  let prefix = '';
  const joined = ctx.joined?.root === scope ? ctx.joined : undefined;
  for (const hop of parts.slice(0, -1)) {
    const rel = relationOf(ctx, cur.table, hop, path, name);
    prefix += (prefix ? '.' : '') + hop;
    if (joined && rel.kind === 'one' && !from) {
      let alias = joined.aliases.get(prefix);
      if (!alias) {
        alias = ctx.alias();
        joined.aliases.set(prefix, alias);
        joined.joins.push(` LEFT JOIN ${rel.target.quoted} AS ${alias} ON ${joinOn(rel, cur, alias)}`);
      }
      cur = { table: rel.target, ref: alias };
      continue;
    }
    if (rel.kind === 'many') {
      if (!manyAllowed)
        throw DbErrors.invalid(
          path,
          `'${hop}' is a one-to-many relation; only many-to-one paths (a foreign key column's name) work here`,
        );
      many = true;
    }
    const alias = ctx.alias();
    const on = joinOn(rel, cur, alias);
    if (!from) {
      from = `${rel.target.quoted} AS ${alias}`;
      corr = on;
    } else from += ` JOIN ${rel.target.quoted} AS ${alias} ON ${on}`;
    cur = { table: rel.target, ref: alias };
  }
  const col = readColumn(ctx, cur.table, parts.at(-1), path);
  const ref = `${cur.ref}.${col.quoted}`;
  if (many) return { col, expr: ref, exists: { from, where: corr } };
  return { col, expr: from ? `(SELECT ${ref} FROM ${from} WHERE ${corr})` : ref };
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

/** ` WHERE …` of a table's own filters (the admin data browser's too), or ''. */
export function where(table: Table, filters: unknown, params: Params): string {
  const parts = conditions(new Ctx(params, 0), top(table), filters, 'filters');
  return parts.length ? ' WHERE ' + parts.join(' AND ') : '';
}

/** The conditions of a filter list (ANDed by the caller), each group in parentheses. */
function conditions(ctx: Ctx, scope: Scope, filters: unknown, path: string): string[] {
  ctx.params.from = 'filters';
  if (filters === undefined) return [];
  if (!Array.isArray(filters))
    throw DbErrors.invalid(path, 'must be an array of filter items ({field, op, value} or a group)');
  return filters.map((f, i) => condition(ctx, scope, f, `${path}[${i}]`, 0));
}

const GROUPS = ['or', 'and', 'not'] as const;

function condition(ctx: Ctx, scope: Scope, f: unknown, path: string, depth: number): string {
  if (++ctx.filterItems > MAX_FILTER_ITEMS)
    throw DbErrors.invalid(path, `filters hold at most ${MAX_FILTER_ITEMS} items in all (conditions and groups)`);
  if (!isObject(f))
    throw DbErrors.invalid(
      path,
      'must be an object {field, op, value} or a group {or: [...]}, {and: [...]}, {not: item}',
    );
  // A condition's keys make it one (an `or` beside them is then an unknown key of the condition).
  const group = 'field' in f || 'op' in f || 'value' in f ? undefined : GROUPS.find((g) => g in f);
  if (group) {
    for (const k of Object.keys(f))
      if (k !== group) throw DbErrors.invalid(`${path}.${k}`, `unknown key; a group holds only its "${group}"`);
    if (depth >= MAX_GROUP_DEPTH)
      throw DbErrors.invalid(`${path}.${group}`, `groups nest at most ${MAX_GROUP_DEPTH} levels`);
    if (group === 'not') return `NOT (${condition(ctx, scope, f.not, `${path}.not`, depth + 1)})`;
    const list = f[group];
    if (!Array.isArray(list) || list.length === 0)
      throw DbErrors.invalid(`${path}.${group}`, 'must be a non-empty array of filter items');
    const parts = list.map((x, i) => condition(ctx, scope, x, `${path}.${group}[${i}]`, depth + 1));
    return '(' + parts.join(group === 'or' ? ' OR ' : ' AND ') + ')';
  }
  for (const k of Object.keys(f))
    if (k !== 'field' && k !== 'op' && k !== 'value')
      throw DbErrors.invalid(
        `${path}.${k}`,
        'unknown key; a filter has field, op and value (or is a group: or, and, not)',
      );
  const op = f.op;
  if (typeof op !== 'string' || !(OPERATORS as readonly string[]).includes(op)) {
    throw DbErrors.invalid(`${path}.op`, `unknown operator; use one of ${OPERATORS.join(', ')}`);
  }
  const r = resolve(ctx, scope, f.field, `${path}.field`, true);
  const cond = comparison(ctx.params, r.col, r.expr, op as Operator, f.value, path);
  return r.exists ? `EXISTS (SELECT 1 FROM ${r.exists.from} WHERE ${r.exists.where} AND ${cond})` : cond;
}

/** `expr op value` for a value of `col`'s type. */
function comparison(params: Params, col: Column, q: string, op: Operator, v: unknown, path: string): string {
  const value = filterValue(col, op, v, path);
  switch (op) {
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
}

/**
 * The bind parameter of the filter at `path` on `col` with operator `op` (null for is_null,
 * which has none), or the 400 that names what is wrong with it.
 */
function filterValue(col: Column, op: Operator, v: unknown, path: string): string | null {
  switch (op) {
    case 'is_null':
      if (typeof v !== 'boolean') throw DbErrors.invalid(`${path}.value`, 'is_null takes true or false');
      return null;
    case 'in':
    case 'not_in': {
      if (!Array.isArray(v) || v.length === 0) throw DbErrors.invalid(`${path}.value`, `${op} takes a non-empty array`);
      if (col.isArray || col.kind === 'json')
        throw DbErrors.invalid(
          `${path}.op`,
          `${op} is not available for ${col.isArray ? 'array' : 'json'} column '${col.name}'`,
        );
      if (v.some((x) => x === null))
        throw DbErrors.invalid(`${path}.value`, `${op} values cannot be null; add an is_null filter instead`);
      // One value per element: a nested array would become another dimension of the array parameter.
      if (v.some((x) => typeof x === 'object'))
        throw DbErrors.invalid(
          `${path}.value`,
          `${op} takes a flat array of values (strings, numbers or booleans); nested arrays and objects are not values`,
        );
      try {
        return encodeList(col, v);
      } catch (e) {
        if (e instanceof ValueError) throw DbErrors.column(col.name, e.message, undefined, `${path}.value`);
        throw e;
      }
    }
    default: {
      if (v === null || v === undefined)
        throw DbErrors.invalid(`${path}.value`, `${op} needs a value; to match NULL use is_null`);
      if (TEXT_OPS.has(op)) {
        if (col.kind !== 'text' || col.isArray)
          throw DbErrors.invalid(`${path}.op`, `${op} applies to text columns; '${col.name}' is not one`);
        if (typeof v !== 'string')
          throw DbErrors.invalid(`${path}.value`, `${op} takes a pattern string (% and _ are wildcards)`);
        return v;
      }
      if (col.kind === 'json' && (ORDER_OPS.has(op) || col.castType === 'json')) {
        throw DbErrors.invalid(`${path}.op`, `${op} is not available for json column '${col.name}'`);
      }
      return encode(col, v, `${path}.value`);
    }
  }
}

/** The columns a request reads back (`fields`), each checked against the caller's grants. */
function fieldsOf(ctx: Ctx, table: Table, fields: unknown, path: string, all: () => Column[]): Column[] {
  if (fields === undefined) return all();
  if (!Array.isArray(fields)) throw DbErrors.invalid(path, 'must be an array of column names');
  if (fields.length === 0) throw DbErrors.invalid(path, 'must name at least one column (omit it for all columns)');
  const seen = new Set<string>();
  const cols: Column[] = [];
  fields.forEach((f, i) => {
    const c = readColumn(ctx, table, f, `${path}[${i}]`);
    if (!seen.has(c.name)) {
      cols.push(c);
      seen.add(c.name);
    }
  });
  return cols;
}

/** A table's own sort (the admin data browser's too), or ''. */
export function orderBy(table: Table, sort: unknown): string {
  const parts = sortItems(new Ctx(new Params(), 0), top(table), sort, 'sort');
  return parts.length ? ' ORDER BY ' + parts.join(', ') : '';
}

/**
 * `expr ASC|DESC` per sort item: a column or a many-to-one path. Table-qualified: a bare name
 * would resolve to the select list's alias, which for dates, timestamps and arrays is their
 * text form (year 10000 before 9999, no index use).
 */
function sortItems(ctx: Ctx, scope: Scope, sort: unknown, path: string, named?: Map<string, string>): string[] {
  if (sort === undefined) return [];
  if (!Array.isArray(sort)) throw DbErrors.invalid(path, 'must be an array of {field, direction}');
  return sort.map((s, i) => {
    const at = `${path}[${i}]`;
    if (!isObject(s)) throw DbErrors.invalid(at, 'must be an object {field, direction}');
    for (const k of Object.keys(s))
      if (k !== 'field' && k !== 'direction')
        throw DbErrors.invalid(`${at}.${k}`, 'unknown key; a sort item has field and direction');
    const dir = s.direction === undefined ? 'asc' : typeof s.direction === 'string' ? s.direction.toLowerCase() : '';
    if (!(DIRECTIONS as readonly string[]).includes(dir))
      throw DbErrors.invalid(`${at}.direction`, 'must be asc or desc');
    let expr: string;
    if (named) {
      // aggregate: the groups' own columns and aggregates.
      const found = typeof s.field === 'string' ? named.get(s.field) : undefined;
      if (!found)
        throw DbErrors.invalid(
          `${at}.field`,
          `sort an aggregate by one of its group columns or aggregates: ${[...named.keys()].join(', ')}`,
        );
      expr = found;
    } else expr = resolve(ctx, scope, s.field, `${at}.field`, false).expr;
    return `${expr} ${dir === 'desc' ? 'DESC' : 'ASC'}`;
  });
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

function limitOf(v: unknown, path: string, dflt: number, ctx: Ctx): number {
  const limit = v === undefined ? dflt : nonNegativeInt(v, path);
  if (limit > ctx.maxLimit)
    throw DbErrors.invalid(path, `must be at most ${ctx.maxLimit} (${ctx.limitFrom}); page with offset`);
  return limit;
}

function booleanOf(v: unknown, path: string): boolean {
  if (v !== undefined && typeof v !== 'boolean') throw DbErrors.invalid(path, 'must be true or false');
  return v === true;
}

export interface BuildOptions {
  maxLimit: number;
  /** What sets `maxLimit`, named in the 400 past it (default: the setting db.max_limit). */
  limitFrom?: string;
  returning?: boolean;
  maxBytes?: number;
  /** The caller's reading rights on every table and column reached (none: all of them). */
  access?: Access;
}

/**
 * Validate the request against the table and build the statement. `returning: false`
 * (a user role that may read no column of the table) leaves RETURNING out of writes:
 * they answer no rows, and `count` is the number of rows written.
 */
export function buildStatement(body: QueryBody, table: Table, opts: BuildOptions): Statement {
  const st = build(body, table, opts);
  return body.action === 'select' || body.action === 'aggregate' ? st : bounded(st, opts.maxBytes);
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

function build(body: QueryBody, table: Table, opts: BuildOptions): Statement {
  const action = body.action as Action;
  if (!(ACTIONS as readonly string[]).includes(action))
    throw DbErrors.invalid('action', `unknown action; use one of ${ACTIONS.join(', ')}`);
  for (const k of Object.keys(body)) {
    if (!ALLOWED[action].has(k)) throw DbErrors.invalid(k, KNOWN.has(k) ? `not used by ${action}` : 'unknown field');
  }
  const t = table.quoted;
  const params = new Params();
  const ctx = new Ctx(params, opts.maxLimit, opts.access, opts.limitFrom);
  const scope = top(table);
  if (action === 'aggregate') return aggregate(ctx, scope, body);
  const noRows = opts.returning === false && action !== 'select';
  // A role that may read nothing of the table asking for fields: the refusal names the first.
  if (noRows && body.fields !== undefined) fieldsOf(ctx, table, body.fields, 'fields', () => []);
  const cols = noRows
    ? []
    : fieldsOf(ctx, table, body.fields, 'fields', () => opts.access?.readable(table) ?? table.columnList);
  const list = cols === table.columnList ? table.selectAll : cols.map((c) => c.select).join(', ');
  const ret = noRows ? '' : ` RETURNING ${list}`;
  const whereOf = () => {
    const parts = conditions(ctx, scope, body.filters, 'filters');
    return parts.length ? ' WHERE ' + parts.join(' AND ') : '';
  };

  switch (action) {
    case 'select': {
      const w = whereOf();
      const sort = sortItems(ctx, scope, body.sort, 'sort');
      const o = sort.length ? ' ORDER BY ' + sort.join(', ') : '';
      const limit = limitOf(body.limit, 'limit', 100, ctx);
      const offset = body.offset === undefined ? 0 : nonNegativeInt(body.offset, 'offset');
      const total = booleanOf(body.total, 'total');
      const expanded =
        body.expand === undefined ? undefined : expandObject(ctx, scope, body.expand, 'expand', 1, limit);
      const more = expanded ? `, ${expanded.sql} AS ${quoteIdent(EXPAND_COLUMN)}` : '';
      const page = `LIMIT $${params.add(limit)} OFFSET $${params.add(offset)}`;
      const st = params.statement(
        total
          ? counted(ctx, list + more, ` FROM ${t}${w}`, o, page)
          : `SELECT ${list}${more} FROM ${t}${w}${o} ${page}`,
        cols,
      );
      if (expanded) st.expand = expanded.decode;
      st.totalInRows = total;
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
      const w = whereOf();
      return params.statement(`UPDATE ${t} SET ${set}${w}${ret}`, cols);
    }
    case 'delete': {
      if (!Array.isArray(body.filters) || body.filters.length === 0) throw DbErrors.filtersRequired('delete');
      const w = whereOf();
      return params.statement(`DELETE FROM ${t}${w}${ret}`, cols);
    }
  }
}

const RELATION_KEYS = new Set(['fields', 'filters', 'sort', 'expand']);
const MANY_KEYS = new Set([...RELATION_KEYS, 'limit', 'offset', 'total']);

function readable(ctx: Ctx, table: Table): Column[] {
  return ctx.access?.readable(table) ?? table.columnList;
}

/** One related row as JSON, its values in the API's representation (`jsonValue`), with its own `expand`. */
function rowJson(ctx: Ctx, cols: Column[], alias: string, nested: string | undefined): string {
  const r = ctx.alias();
  const list = cols.map((c) => `${jsonValue(c, `${alias}.${c.quoted}`)} AS ${c.quoted}`);
  if (nested) list.push(`${nested} AS "expand"`);
  return `(SELECT row_to_json(${r}) FROM (SELECT ${list.join(', ')}) ${r})`;
}

/**
 * The `expand` object of a row of `scope` as one SQL expression: a correlated subquery per
 * relation (an object or null for many-to-one, an array for one-to-many, and its total when
 * asked), each reading its table as the statement's role, so grants and row-level security
 * apply as in a direct select. docs/database.md, "Relations: expand".
 */
function expandObject(
  ctx: Ctx,
  scope: Scope,
  spec: unknown,
  path: string,
  depth: number,
  /** How many rows of `scope` the answer may hold at most: each may bring its relations' rows. */
  rows: number,
): { sql: string; decode: NestedDecode } {
  if (!isObject(spec) || Object.keys(spec).length === 0)
    throw DbErrors.invalid(path, 'must be an object of relation name → {fields, filters, sort, expand, …}');
  if (depth > MAX_EXPAND_DEPTH)
    throw DbErrors.invalid(path, `relations nest at most ${MAX_EXPAND_DEPTH} levels below the entity`);
  const parts: string[] = [];
  const decode: NestedDecode = { arrays: [], relations: [] };
  for (const [name, r] of Object.entries(spec)) {
    const at = `${path}.${name}`;
    if (++ctx.relations > MAX_RELATIONS)
      throw DbErrors.invalid(at, `at most ${MAX_RELATIONS} relations in one request`);
    const rel = relationOf(ctx, scope.table, name, at);
    const many = rel.kind === 'many';
    if (!isObject(r)) throw DbErrors.invalid(at, 'must be an object {fields, filters, sort, expand, …} ({} for all)');
    for (const k of Object.keys(r)) {
      if ((many ? MANY_KEYS : RELATION_KEYS).has(k)) continue;
      throw DbErrors.invalid(
        `${at}.${k}`,
        MANY_KEYS.has(k)
          ? `${k} is for one-to-many relations; '${name}' is many-to-one (one row or null)`
          : `unknown key; a relation takes fields, filters, sort, expand${many ? ', limit, offset and total' : ''}`,
      );
    }
    const alias = ctx.alias();
    const inner: Scope = { table: rel.target, ref: alias };
    const cols = fieldsOf(ctx, rel.target, r.fields, `${at}.fields`, () => readable(ctx, rel.target));
    // Bounded before anything runs: nested one-to-many limits multiply (1,000 × 1,000 × 1,000
    // related rows would be built before the answer's size limit could cut them).
    const limit = many ? limitOf(r.limit, `${at}.limit`, EXPAND_DEFAULT_LIMIT, ctx) : 1;
    const reach = rows * limit;
    ctx.expandedRows += reach;
    if (ctx.expandedRows > MAX_EXPANDED_ROWS)
      throw DbErrors.invalid(
        many ? `${at}.limit` : at,
        `the limits allow ${ctx.expandedRows.toLocaleString('en')} related rows in this answer (the entity's limit times each one-to-many relation's limit along its path, summed over relations); at most ${MAX_EXPANDED_ROWS.toLocaleString('en')}: lower a limit`,
      );
    const nested =
      r.expand === undefined ? undefined : expandObject(ctx, inner, r.expand, `${at}.expand`, depth + 1, reach);
    const where = [joinOn(rel, scope, alias), ...conditions(ctx, inner, r.filters, `${at}.filters`)].join(' AND ');
    const sort = sortItems(ctx, inner, r.sort, `${at}.sort`);
    const row = rowJson(ctx, cols, alias, nested?.sql);
    const from = `${rel.target.quoted} AS ${alias}`;
    decode.relations.push({
      name,
      many,
      decode: { arrays: cols.filter((c) => c.isArray), relations: nested?.decode.relations ?? [] },
    });
    if (!many) {
      parts.push(`(SELECT ${row} FROM ${from} WHERE ${where}) AS ${quoteIdent(name)}`);
      continue;
    }
    const offset = r.offset === undefined ? 0 : nonNegativeInt(r.offset, `${at}.offset`);
    const order = sort.length ? `ORDER BY ${sort.join(', ')}` : '';
    const x = ctx.alias();
    parts.push(
      `(SELECT coalesce(json_agg(${x}."j" ORDER BY ${x}.${ROW_NUMBER}), '[]'::json) FROM (SELECT ${row} AS "j", ` +
        `row_number() OVER (${order}) AS ${ROW_NUMBER} FROM ${from} WHERE ${where} ${order} ` +
        `LIMIT $${ctx.params.add(limit)} OFFSET $${ctx.params.add(offset)}) ${x}) AS ${quoteIdent(name)}`,
    );
    if (booleanOf(r.total, `${at}.total`))
      parts.push(`(SELECT count(*) FROM ${from} WHERE ${where}) AS ${quoteIdent(`${name}_total`)}`);
  }
  const e = ctx.alias();
  return { sql: `(SELECT row_to_json(${e}) FROM (SELECT ${parts.join(', ')}) ${e})`, decode };
}

const AGGREGATE_KEYS = new Set(['fn', 'field', 'as']);
const OUTPUT_NAME = /^[A-Za-z0-9_]{1,63}$/;
const NUMBER_KINDS = new Set(['int', 'bigint', 'numeric', 'float']);
const ORDERED_KINDS = new Set(['int', 'bigint', 'numeric', 'float', 'text', 'timestamptz', 'timestamp', 'date']);
const KIND_NAME: Partial<Record<string, string>> = { bool: 'boolean', json: 'json', bytea: 'binary (bytea)' };

/** A result column of an aggregate, typed so the value codec renders it as the spec says. */
function outputColumn(name: string, like: Pick<Column, 'castType' | 'kind' | 'isArray'>): Column {
  const c: Column = {
    name,
    castType: like.castType,
    fullType: like.castType,
    kind: like.kind,
    isArray: like.isArray,
    notNull: false,
    maxLength: null,
    quoted: quoteIdent(name),
    select: '',
    hasDefault: false,
  };
  c.select = selectExpr(c);
  return c;
}

const FLOAT = { castType: 'double precision', kind: 'float', isArray: false } as const;
const NUMERIC = { castType: 'numeric', kind: 'numeric', isArray: false } as const;

/** One aggregate's SQL and result column, or the 400 naming what does not fit. */
function aggregateOf(ctx: Ctx, scope: Scope, a: unknown, at: string): { name: string; sql: string; col: Column } {
  if (!isObject(a)) throw DbErrors.invalid(at, 'must be an object {fn, field, as}');
  for (const k of Object.keys(a))
    if (!AGGREGATE_KEYS.has(k)) throw DbErrors.invalid(`${at}.${k}`, 'unknown key; an aggregate has fn, field and as');
  const fn = a.fn as AggregateFn;
  if (typeof fn !== 'string' || !(AGGREGATE_FNS as readonly string[]).includes(fn))
    throw DbErrors.invalid(`${at}.fn`, `unknown function; use one of ${AGGREGATE_FNS.join(', ')}`);
  if (a.field === undefined && fn !== 'count')
    throw DbErrors.invalid(`${at}.field`, `${fn} needs a field (a column or a many-to-one path)`);
  const r = a.field === undefined ? undefined : resolve(ctx, scope, a.field, `${at}.field`, false);
  const name = a.as ?? (r ? `${fn}_${String(a.field).replace(/\./g, '_')}` : 'count');
  if (typeof name !== 'string' || !OUTPUT_NAME.test(name))
    throw DbErrors.invalid(
      `${at}.as`,
      a.as === undefined
        ? `the default name '${name}' is not a valid output name; give one with "as" (1–63 of a-z A-Z 0-9 _)`
        : 'must be 1–63 of a-z A-Z 0-9 _',
    );
  if (!r) return { name, sql: 'count(*)::float8', col: outputColumn(name, FLOAT) };
  const { col, expr } = r;
  const kind = col.isArray ? 'array' : (KIND_NAME[col.kind] ?? col.kind);
  const refuse = (what: string) =>
    DbErrors.invalid(`${at}.field`, `${fn} applies to ${what}; '${String(a.field)}' is ${kind}`);
  switch (fn) {
    case 'count':
      return { name, sql: `count(${expr})::float8`, col: outputColumn(name, FLOAT) };
    case 'count_distinct':
      if (col.castType === 'json') throw refuse('values that compare (json does not; jsonb does)');
      return { name, sql: `count(DISTINCT ${expr})::float8`, col: outputColumn(name, FLOAT) };
    case 'sum':
    case 'avg':
      if (col.isArray || !NUMBER_KINDS.has(col.kind)) throw refuse('number columns');
      return col.kind === 'float'
        ? { name, sql: `${fn}(${expr})::float8`, col: outputColumn(name, FLOAT) }
        : { name, sql: `${fn}(${expr})::numeric`, col: outputColumn(name, NUMERIC) };
    default:
      if (col.isArray || !ORDERED_KINDS.has(col.kind)) throw refuse('numbers, text, dates and timestamps');
      return { name, sql: `${fn}(${expr})`, col: outputColumn(name, col) };
  }
}

/**
 * `action: "aggregate"` (docs/database.md, "Aggregates"): the groups and their aggregates in
 * a subquery, `having`, sort and paging over its rows; with `total`, the groups' count is a
 * column of the same statement (a one-row count left-joined to the page, so an empty page
 * still carries it).
 */
function aggregate(ctx: Ctx, scope: Scope, body: QueryBody): Statement {
  const table = scope.table;
  const joins: string[] = [];
  ctx.joined = { root: scope, joins, aliases: new Map() };
  const outputs = new Map<string, Column>();
  const items: string[] = [];
  const add = (name: string, sql: string, col: Column, at: string) => {
    if (outputs.has(name))
      throw DbErrors.invalid(at, `output name '${name}' is taken by another group column or aggregate`);
    outputs.set(name, col);
    items.push(`${sql} AS ${col.quoted}`);
  };
  if (body.group_by !== undefined && !Array.isArray(body.group_by))
    throw DbErrors.invalid('group_by', 'must be an array of columns or many-to-one paths');
  const groups = body.group_by ?? [];
  groups.forEach((g, i) => {
    const r = resolve(ctx, scope, g, `group_by[${i}]`, false);
    add(g, r.expr, outputColumn(g, r.col), `group_by[${i}]`);
  });
  const aggs: unknown = body.aggregates;
  if (!Array.isArray(aggs) || aggs.length === 0)
    throw DbErrors.invalid('aggregates', 'aggregate needs a non-empty array of {fn, field, as}');
  if (aggs.length > MAX_AGGREGATES) throw DbErrors.invalid('aggregates', `at most ${MAX_AGGREGATES} aggregates`);
  aggs.forEach((a, i) => {
    const o = aggregateOf(ctx, scope, a, `aggregates[${i}]`);
    add(o.name, o.sql, o.col, `aggregates[${i}].as`);
  });
  const filters = conditions(ctx, scope, body.filters, 'filters');
  const inner =
    `SELECT ${items.join(', ')} FROM ${table.quoted}${joins.join('')}` +
    (filters.length ? ` WHERE ${filters.join(' AND ')}` : '') +
    (groups.length ? ` GROUP BY ${groups.map((_, i) => i + 1).join(', ')}` : '');

  // having and sort over the groups' rows (`g`): their names, nothing of the tables.
  const g = ctx.alias();
  const cols = [...outputs.values()];
  const groupRows: Table = {
    name: table.name,
    columns: outputs,
    columnList: cols,
    quoted: g,
    selectAll: '',
    primaryKey: [],
    privileges: {},
    rls: false,
    relations: new Map(),
  };
  const names = [...outputs.keys()];
  let having: string[];
  try {
    having = conditions(
      new Ctx(ctx.params, ctx.maxLimit, undefined, ctx.limitFrom),
      { table: groupRows, ref: g },
      body.having,
      'having',
    );
  } catch (e) {
    if (!(e instanceof UnknownName)) throw e;
    throw DbErrors.invalid(e.path, `having takes the group columns and the aggregates' names: ${names.join(', ')}`);
  }
  const h = having.length ? ` WHERE ${having.join(' AND ')}` : '';
  const named = new Map(names.map((n) => [n, `${g}.${quoteIdent(n)}`]));
  const sort = sortItems(ctx, scope, body.sort, 'sort', named);
  const o = sort.length ? ` ORDER BY ${sort.join(', ')}` : '';
  const limit = limitOf(body.limit, 'limit', 100, ctx);
  const offset = body.offset === undefined ? 0 : nonNegativeInt(body.offset, 'offset');
  const list = cols.map((c) => c.select).join(', ');
  const page = `LIMIT $${ctx.params.add(limit)} OFFSET $${ctx.params.add(offset)}`;
  if (!booleanOf(body.total, 'total'))
    return ctx.params.statement(`SELECT ${list} FROM (${inner}) AS ${g}${h}${o} ${page}`, cols);
  const st = ctx.params.statement(`WITH ${g} AS (${inner}) ${counted(ctx, list, ` FROM ${g}${h}`, o, page)}`, cols);
  st.totalInRows = true;
  return st;
}

/**
 * A page (`list` ` FROM …` ordered by `order`, `page` its LIMIT/OFFSET) with the count of all the
 * rows it pages through, in one statement: the one-row count left-joined to the page, so an
 * empty page still carries it; each page row numbered to keep its order.
 */
function counted(ctx: Ctx, list: string, from: string, order: string, page: string): string {
  const [c, p] = [ctx.alias(), ctx.alias()];
  const total = quoteIdent(TOTAL_COLUMN);
  return (
    `SELECT ${p}.*, ${c}.${total} FROM (SELECT count(*)::int8 AS ${total}${from}) ${c} ` +
    `LEFT JOIN (SELECT ${list}, row_number() OVER (${order.trim()}) AS ${ROW_NUMBER}${from}${order} ${page}) ${p} ` +
    `ON true ORDER BY ${p}.${ROW_NUMBER}`
  );
}

/**
 * The answer to a statement's result: the rows in the API's representation with their
 * `expand` objects finished, the count, and the total the statement carried in its rows.
 * The Database API's and the admin data browser's (one reading of one statement's shape).
 */
export function answerOf(st: Statement, res: QueryResult<Record<string, unknown>>): QueryResultData {
  let total: number | undefined;
  let raw = res.rows;
  if (st.totalInRows) {
    // total: every row carries the count, and one row of nulls does when the page is empty (`counted`).
    total = Number(raw[0]?.[TOTAL_COLUMN] ?? 0);
    raw = raw.filter((r) => r[ROW_COLUMN] !== null && r[ROW_COLUMN] !== undefined);
    for (const r of raw) {
      delete r[TOTAL_COLUMN];
      delete r[ROW_COLUMN];
    }
  }
  const rows = decodeRows(st.columns, raw);
  if (st.expand) {
    for (const r of rows) {
      r.expand = decodeExpand(st.expand, r[EXPAND_COLUMN]);
      delete r[EXPAND_COLUMN];
    }
  }
  // A write without RETURNING (a role that may read no column) counts the rows written.
  const out: QueryResultData = { rows, count: st.columns.length ? rows.length : res.rowCount };
  if (total !== undefined) out.total = total;
  return out;
}
