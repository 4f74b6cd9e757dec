/**
 * The live catalog of the data schema: which tables exist, their columns and
 * column types, and which columns each constraint covers. Every identifier of a
 * Database API request is checked here before it is quoted into SQL.
 *
 * Freshness (docs/database.md, "Catalog"): the catalog is cached and reloaded
 * (a) when older than `ttlMs`, (b) at once when a request names a table or column
 * the cached copy does not know (unless it was reloaded less than `missCooldownMs` ago, so a client
 * probing names cannot turn every request into catalog queries), and (c) when a
 * statement fails because the schema changed under it (undefined table/column).
 * Operator migrations run before the service starts, so the first load sees them.
 */
import { quoteIdent, type Queryable } from '../../db/engine';
import { selectExpr } from './value-codec';
import { UnknownName } from './query-builder';
import type { Column, IdentityRole, Table, ValueKind } from './catalog-types';

export type {
  Column,
  ColumnPrivileges,
  IdentityRole,
  Relation,
  Table,
  TablePrivileges,
  ValueKind,
} from './catalog-types';

export interface CatalogSnapshot {
  tables: Map<string, Table>;
  /** Constraint name → its columns (unique, primary key, foreign key, check). */
  constraints: Map<string, string[]>;
  loadedAt: number;
}

const KIND_BY_TYPE: Record<string, ValueKind> = {
  int2: 'int',
  int4: 'int',
  int8: 'bigint',
  oid: 'int',
  float4: 'float',
  float8: 'float',
  numeric: 'numeric',
  money: 'other',
  bool: 'bool',
  text: 'text',
  varchar: 'text',
  bpchar: 'text',
  name: 'text',
  citext: 'text',
  char: 'text',
  json: 'json',
  jsonb: 'json',
  bytea: 'bytea',
  uuid: 'uuid',
  timestamptz: 'timestamptz',
  timestamp: 'timestamp',
  date: 'date',
};

// One statement, so a refresh is one round trip. Only the configured schema is read:
// platform schemas (basalt, ext_*, pg_*) can never appear in the snapshot.
const COLUMNS_SQL = `
SELECT c.relname AS table_name, a.attname AS column_name, a.attnum,
       format_type(a.atttypid, NULL) AS cast_type, format_type(a.atttypid, a.atttypmod) AS full_type,
       COALESCE(et.typname, bt.typname, t.typname) AS type_name,
       (t.typcategory = 'A' OR bt.typcategory = 'A') AS is_array,
       a.attnotnull AS not_null,
       CASE WHEN t.typname IN ('varchar', 'bpchar') AND a.atttypmod > 4 THEN a.atttypmod - 4 END AS max_length,
       (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '') AS has_default,
       array_position(pk.indkey::int2[], a.attnum) AS pk_position
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_catalog.pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
  LEFT JOIN pg_catalog.pg_type et ON et.oid = COALESCE(NULLIF(bt.typelem, 0), NULLIF(t.typelem, 0))
       AND (t.typcategory = 'A' OR bt.typcategory = 'A')
  LEFT JOIN pg_catalog.pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary
 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
 ORDER BY c.relname, a.attnum`;

const CONSTRAINTS_SQL = `
SELECT con.conname AS name, array_agg(a.attname::text ORDER BY a.attnum) AS columns
  FROM pg_catalog.pg_constraint con
  JOIN pg_catalog.pg_namespace n ON n.oid = con.connamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = ANY(con.conkey)
 WHERE n.nspname = $1 AND con.contype IN ('u', 'p', 'f', 'c')
 GROUP BY con.conname`;

// What the two roles of users' own data may do, per column (has_column_privilege counts
// table-level grants, PUBLIC and role membership, as the server itself does). Only rows
// of tables a role holds something on; no rows at all when the roles do not exist.
const PRIVILEGES_SQL = `
SELECT c.relname AS table_name, a.attname AS column_name,
       CASE r.rolname WHEN 'basalt_user' THEN 'user' ELSE 'anon' END AS role,
       has_column_privilege(r.oid, c.oid, a.attnum, 'SELECT') AS sel,
       has_column_privilege(r.oid, c.oid, a.attnum, 'INSERT') AS ins,
       has_column_privilege(r.oid, c.oid, a.attnum, 'UPDATE') AS upd,
       has_table_privilege(r.oid, c.oid, 'DELETE') AS del
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 CROSS JOIN pg_catalog.pg_roles r
 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
   AND r.rolname IN ('basalt_user', 'basalt_anon')
   AND has_schema_privilege(r.oid, n.oid, 'USAGE')
   AND (has_any_column_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE') OR has_table_privilege(r.oid, c.oid, 'DELETE'))`;

// Foreign keys between tables of the data schema, each column pair in key order.
const FOREIGN_KEYS_SQL = `
SELECT con.conname AS name, src.relname AS from_table, dst.relname AS to_table,
       array_agg(fa.attname::text ORDER BY k.i) AS from_columns, array_agg(ta.attname::text ORDER BY k.i) AS to_columns
  FROM pg_catalog.pg_constraint con
  JOIN pg_catalog.pg_class src ON src.oid = con.conrelid
  JOIN pg_catalog.pg_class dst ON dst.oid = con.confrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = src.relnamespace AND n.oid = dst.relnamespace
  CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(f, t, i)
  JOIN pg_catalog.pg_attribute fa ON fa.attrelid = con.conrelid AND fa.attnum = k.f
  JOIN pg_catalog.pg_attribute ta ON ta.attrelid = con.confrelid AND ta.attnum = k.t
 WHERE n.nspname = $1 AND con.contype = 'f'
 GROUP BY con.oid, con.conname, src.relname, dst.relname
 ORDER BY src.relname, con.conname`;

const RLS_SQL = `
SELECT c.relname AS table_name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relrowsecurity`;

/** Schemas that hold platform data; refused as the data schema (one list, in the settings' rules). */
export { isPlatformSchema } from '../../config/platform-schemas';

export async function loadCatalog(db: Queryable, schema: string): Promise<CatalogSnapshot> {
  const [cols, cons, privs, rls, fks] = await Promise.all([
    db.query<{
      table_name: string;
      column_name: string;
      cast_type: string;
      full_type: string;
      type_name: string;
      is_array: boolean;
      not_null: boolean;
      max_length: number | null;
      has_default: boolean;
      pk_position: number | null;
    }>(COLUMNS_SQL, [schema]),
    db.query<{ name: string; columns: string[] | string }>(CONSTRAINTS_SQL, [schema]),
    db.query<{
      table_name: string;
      column_name: string;
      role: IdentityRole;
      sel: boolean;
      ins: boolean;
      upd: boolean;
      del: boolean;
    }>(PRIVILEGES_SQL, [schema]),
    db.query<{ table_name: string }>(RLS_SQL, [schema]),
    db.query<{
      from_table: string;
      to_table: string;
      from_columns: string[] | string;
      to_columns: string[] | string;
    }>(FOREIGN_KEYS_SQL, [schema]),
  ]);
  const tables = new Map<string, Table>();
  const pkPositions = new Map<Table, [number, string][]>();
  for (const r of cols.rows) {
    let t = tables.get(r.table_name);
    if (!t)
      tables.set(
        r.table_name,
        (t = {
          name: r.table_name,
          columns: new Map(),
          columnList: [],
          quoted: quoteIdent(r.table_name),
          selectAll: '',
          primaryKey: [],
          privileges: {},
          rls: false,
          relations: new Map(),
        }),
      );
    if (r.pk_position !== null) {
      const list = pkPositions.get(t) ?? [];
      list.push([Number(r.pk_position), r.column_name]);
      pkPositions.set(t, list);
    }
    const col: Column = {
      name: r.column_name,
      castType: r.cast_type,
      fullType: r.full_type,
      kind: KIND_BY_TYPE[r.type_name] ?? 'other',
      isArray: !!r.is_array,
      notNull: !!r.not_null,
      maxLength: r.max_length === null ? null : Number(r.max_length),
      quoted: quoteIdent(r.column_name),
      select: '',
      hasDefault: !!r.has_default,
    };
    col.select = selectExpr(col);
    t.columns.set(col.name, col);
    t.columnList.push(col);
  }
  for (const t of tables.values()) t.selectAll = t.columnList.map((c) => c.select).join(', ');
  for (const [t, list] of pkPositions) t.primaryKey = list.sort((a, b) => a[0] - b[0]).map(([, name]) => name);
  for (const r of privs.rows) {
    const t = tables.get(r.table_name);
    if (!t) continue;
    const p = (t.privileges[r.role] ??= { delete: false, columns: new Map() });
    p.delete ||= !!r.del;
    if (r.sel || r.ins || r.upd) p.columns.set(r.column_name, { select: !!r.sel, insert: !!r.ins, update: !!r.upd });
  }
  for (const r of rls.rows) {
    const t = tables.get(r.table_name);
    if (t) t.rls = true;
  }
  for (const r of fks.rows) {
    const from = tables.get(r.from_table);
    const to = tables.get(r.to_table);
    const fc = Array.isArray(r.from_columns) ? r.from_columns : parseNameArray(r.from_columns);
    const tc = Array.isArray(r.to_columns) ? r.to_columns : parseNameArray(r.to_columns);
    if (!from || !to || !fc.length) continue;
    const on = fc.map((c, i) => [from.columns.get(c)!, to.columns.get(tc[i]!)!] as [Column, Column]);
    if (on.some(([a, b]) => !a || !b)) continue;
    // Two keys starting at the same column would share a name: the first (by constraint name) keeps it.
    const one = fc[0]!;
    if (!from.relations.has(one)) from.relations.set(one, { name: one, kind: 'one', target: to, on });
    const many = `${r.from_table}_via_${one}`;
    if (!to.relations.has(many))
      to.relations.set(many, { name: many, kind: 'many', target: from, on: on.map(([a, b]) => [b, a]) });
  }
  const constraints = new Map<string, string[]>();
  for (const r of cons.rows) constraints.set(r.name, Array.isArray(r.columns) ? r.columns : parseNameArray(r.columns));
  return { tables, constraints, loadedAt: Date.now() };
}

// name[] may come back as its text form on a driver that does not parse it.
function parseNameArray(text: string): string[] {
  return text
    .replace(/^\{|\}$/g, '')
    .split(',')
    .filter(Boolean)
    .map((s) => s.replace(/^"|"$/g, ''));
}

/** What `Catalog.build` made, with the table and snapshot it made it from (for error mapping). */
export interface Built<T> {
  value: T;
  snap: CatalogSnapshot;
  table: Table;
}

export interface CatalogOptions {
  schema: string;
  ttlMs?: number;
  missCooldownMs?: number;
}

/** The cached catalog with its refresh policy. */
export class Catalog {
  private snapshot: CatalogSnapshot | undefined;
  private loading: Promise<CatalogSnapshot> | undefined;
  private lastRefresh = 0;
  readonly schema: string;
  private readonly ttlMs: number;
  private readonly missCooldownMs: number;

  constructor(
    private readonly db: Queryable,
    opts: CatalogOptions,
  ) {
    this.schema = opts.schema;
    this.ttlMs = opts.ttlMs ?? 5_000;
    this.missCooldownMs = opts.missCooldownMs ?? 200;
  }

  /**
   * The current snapshot, reloaded when stale. `via` runs the catalog queries on a
   * given connection (an open transaction on the embedded engine, which holds the
   * only connection).
   */
  async get(via?: Queryable): Promise<CatalogSnapshot> {
    return this.fresh() ?? this.refresh(via);
  }

  /** The last snapshot loaded, however old (undefined before the first load). */
  latest(): CatalogSnapshot | undefined {
    return this.snapshot;
  }

  /** The current snapshot while it is fresh, without waiting; undefined when it must be (re)loaded. */
  fresh(): CatalogSnapshot | undefined {
    const s = this.snapshot;
    return s && Date.now() - s.loadedAt < this.ttlMs ? s : undefined;
  }

  /**
   * Reload now. Reloads on the shared connection are coalesced; one through a given
   * connection is not, since a shared reload may be waiting for that very connection
   * (the embedded engine's open transaction) and joining it would deadlock.
   */
  refresh(via?: Queryable): Promise<CatalogSnapshot> {
    if (via) {
      this.lastRefresh = Date.now();
      return loadCatalog(via, this.schema).then((snap) => (this.snapshot = snap));
    }
    if (this.loading) return this.loading;
    this.lastRefresh = Date.now();
    const p = loadCatalog(via ?? this.db, this.schema)
      .then((snap) => (this.snapshot = snap))
      .finally(() => {
        this.loading = undefined;
      });
    this.loading = p;
    return p;
  }

  /** A name was not found: reload once (rate-limited) and return the fresh snapshot, or null when it is too soon. */
  async refreshOnMiss(via?: Queryable): Promise<CatalogSnapshot | null> {
    if (this.loading && !via) return this.loading;
    if (Date.now() - this.lastRefresh < this.missCooldownMs) return null;
    return this.refresh(via);
  }

  /**
   * Table `name` and the snapshot it is in, reloading once (rate-limited, `refreshOnMiss`)
   * when the snapshot does not know it; `table` is undefined when it still is not there.
   */
  async table(name: string, via?: Queryable): Promise<{ snap: CatalogSnapshot; table?: Table }> {
    const snap = await this.get(via);
    const table = snap.tables.get(name);
    if (table) return { snap, table };
    const fresh = await this.refreshOnMiss(via);
    return fresh ? { snap: fresh, table: fresh.tables.get(name) } : { snap };
  }

  /**
   * `make(table)` for table `name`, e.g. a statement from the query builder. When the table,
   * or a name `make` looks up (it throws `UnknownName`), is not in the snapshot, the catalog
   * is reloaded once (rate-limited) and `make` tried again: a table or column added since the
   * last load is found. With a fresh snapshot that knows every name (nearly every request)
   * the answer comes without waiting. `errors` turns a table still missing, and the
   * `UnknownName` of the last try, into the caller's error.
   */
  build<T>(
    name: string,
    via: Queryable | undefined,
    make: (table: Table) => T,
    errors: { table: () => Error; name: (e: UnknownName) => Error },
  ): Built<T> | Promise<Built<T>> {
    const snap = this.fresh();
    const table = snap?.tables.get(name);
    if (snap && table) return this.attempt(name, via, make, errors, snap, table);
    return this.table(name, via).then((found) => {
      if (!found.table) throw errors.table();
      return this.attempt(name, via, make, errors, found.snap, found.table);
    });
  }

  /** `make(table)`, or `buildAgain` when it names what the snapshot does not know. */
  private attempt<T>(
    name: string,
    via: Queryable | undefined,
    make: (table: Table) => T,
    errors: { table: () => Error; name: (e: UnknownName) => Error },
    snap: CatalogSnapshot,
    table: Table,
  ): Built<T> | Promise<Built<T>> {
    try {
      return { value: make(table), snap, table };
    } catch (e) {
      if (!(e instanceof UnknownName)) throw e;
      return this.buildAgain(name, via, make, errors, e);
    }
  }

  /** `build`'s second try, after `missed` (a name unknown to the snapshot it was built against). */
  private async buildAgain<T>(
    name: string,
    via: Queryable | undefined,
    make: (table: Table) => T,
    errors: { name: (e: UnknownName) => Error },
    missed: UnknownName,
  ): Promise<Built<T>> {
    const fresh = await this.refreshOnMiss(via);
    const table = fresh?.tables.get(name);
    if (!fresh || !table) throw errors.name(missed);
    try {
      return { value: make(table), snap: fresh, table };
    } catch (e) {
      throw e instanceof UnknownName ? errors.name(e) : e;
    }
  }

  /** Forget the snapshot so the next request reloads it (schema changed under a statement). */
  invalidate(): void {
    this.snapshot = undefined;
  }
}
