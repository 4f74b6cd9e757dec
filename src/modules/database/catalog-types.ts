/**
 * The shapes of the catalog (./catalog.ts): a table, its columns and what each identity
 * may do with them. Apart from the catalog so that the value codec and the query
 * builder, which the catalog uses, read them without importing it.
 */

/** How values of a column are validated, bound and rendered (see value-codec.ts). */
export type ValueKind =
  | 'int'
  | 'bigint'
  | 'float'
  | 'numeric'
  | 'bool'
  | 'text'
  | 'json'
  | 'bytea'
  | 'uuid'
  | 'timestamptz'
  | 'timestamp'
  | 'date'
  | 'other';

export interface Column {
  name: string;
  /** Base type name for casts, e.g. `integer`, `character varying`, `public.mood`, `integer[]`. */
  castType: string;
  /** The declared type with its modifier (`numeric(10,2)`), to find which value does not fit. */
  fullType: string;
  /** Kind of the value, or of the elements for an array column. */
  kind: ValueKind;
  isArray: boolean;
  notNull: boolean;
  /** varchar(n)/char(n) length limit, checked before sending so the error names the column. */
  maxLength: number | null;
  /** The quoted identifier and the select-list expression, made once per catalog load, not per request. */
  quoted: string;
  select: string;
  /** Filled by the database when an insert leaves it out (DEFAULT, identity or generated); for the admin data browser. */
  hasDefault: boolean;
}

export interface Table {
  name: string;
  columns: Map<string, Column>;
  /** Column order as declared, for `select` without `fields`. */
  columnList: Column[];
  quoted: string;
  /** The select list of every column (`select` without `fields`). */
  selectAll: string;
  /** Primary key columns in key order; empty when the table has none (views, tables without one). */
  primaryKey: string[];
  /**
   * What `basalt_user` / `basalt_anon` may do with the table (users' own data), from the
   * catalog's own privilege checks; a role is absent when it holds nothing on it (or no
   * USAGE on the schema).
   */
  privileges: Partial<Record<IdentityRole, TablePrivileges>>;
  /** Row-level security is enabled on the table. */
  rls: boolean;
  /**
   * Relations by name, from the data schema's foreign keys (docs/database.md, "Relations"):
   * many-to-one by this table's first referencing column, one-to-many as
   * `<other table>_via_<its first referencing column>`.
   */
  relations: Map<string, Relation>;
}

/** A foreign key seen from one of its two tables. */
export interface Relation {
  name: string;
  /** one: this table's key refers to `target` (many-to-one); many: `target`'s key refers to this table. */
  kind: 'one' | 'many';
  target: Table;
  /** Column pairs: [this table's column, the target's column], in key order. */
  on: [Column, Column][];
}

/** The identities of users' own data (src/modules/database/identity.ts). */
export type IdentityRole = 'user' | 'anon';

export interface ColumnPrivileges {
  select: boolean;
  insert: boolean;
  update: boolean;
}

export interface TablePrivileges {
  delete: boolean;
  /** Granted columns only: table-level grants count for every column. */
  columns: Map<string, ColumnPrivileges>;
}
