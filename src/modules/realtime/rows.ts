/**
 * Reading changed rows as a subscriber would through the Database API (docs/realtime.md,
 * "Visibility"): their columns, their policies, the API's value representation. One
 * statement reads every changed key of one table for one identity, however many events
 * and streams share them: the cost of the visibility check grows with identities × tables
 * per batch, never with subscribers × events.
 */
import { quoteIdent, type Queryable } from '../../db/engine';
import type { Column, Table } from '../database/catalog';
import { decodeRows } from '../database/value-codec';
import { roleOf, type Identity } from './principal';

/** A decoded row by the outbox's primary-key text of it. */
export type RowsByKey = Map<string, Record<string, unknown>>;

/** Runs `fn` with statements made as `identity` (the user-data identity helper); the platform's connection for service keys. */
export type AsIdentity = <R>(identity: Identity, fn: (q: Queryable) => Promise<R>) => Promise<R>;

const KEY = '"__basalt_pk"';

/** `(SELECT <outbox key text>, <the key's columns> …)`: the keys of `$1` (a JSON array of key objects) as rows of the table's type. */
function keysOf(qualified: string): string {
  return `(SELECT j.value::text AS ${KEY}, r.* FROM jsonb_array_elements($1::jsonb) j,
          jsonb_populate_record(NULL::${qualified}, j.value) r)`;
}

export class RowReader {
  /** Columns of a table a role may select, per catalog load. */
  private granted = new Map<string, { at: number; columns: Column[] }>();

  constructor(
    private readonly schema: string,
    private readonly owner: Queryable,
    private readonly asIdentity: AsIdentity,
  ) {}

  private qualified(table: Table): string {
    return `${quoteIdent(this.schema)}.${table.quoted}`;
  }

  /** The columns `identity` reads of `table`: all for service keys, the role's column grants otherwise. */
  async columns(identity: Identity, table: Table, loadedAt: number): Promise<Column[]> {
    const role = roleOf(identity);
    if (!role) return table.columnList;
    const k = `${role}\u0000${table.name}`;
    const hit = this.granted.get(k);
    if (hit && hit.at === loadedAt) return hit.columns;
    const { rows } = await this.owner.query<{ name: string }>(
      `SELECT a.attname AS name FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
          AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $2)
          AND has_column_privilege($2, a.attrelid, a.attnum, 'SELECT')
        ORDER BY a.attnum`,
      [this.qualified(table), role],
    );
    const names = new Set(rows.map((r) => r.name));
    const columns = table.columnList.filter((c) => names.has(c.name));
    if (this.granted.size > 10_000) this.granted.clear();
    this.granted.set(k, { at: loadedAt, columns });
    return columns;
  }

  /**
   * Whether `identity` may read `table` at all: some column granted, the primary key among
   * them (events name rows by it). Service keys: their whitelist, checked by the caller.
   */
  async mayRead(identity: Identity, table: Table, loadedAt: number): Promise<boolean> {
    if (!roleOf(identity)) return true;
    const cols = await this.columns(identity, table, loadedAt);
    return cols.length > 0 && table.primaryKey.every((k) => cols.some((c) => c.name === k));
  }

  /** The rows with these keys that `identity` sees now, as the Database API would answer them. */
  async rows(identity: Identity, table: Table, keys: string[], loadedAt: number): Promise<RowsByKey> {
    const cols = await this.columns(identity, table, loadedAt);
    const out: RowsByKey = new Map();
    if (!keys.length || !cols.length) return out;
    const on = table.primaryKey.map((k) => `t.${quoteIdent(k)} = k.${quoteIdent(k)}`).join(' AND ');
    const sql = `SELECT ${cols.map((c) => c.select).join(', ')}, ${KEY} FROM (
        SELECT ${cols.map((c) => `t.${c.quoted}`).join(', ')}, k.${KEY}
          FROM ${this.qualified(table)} t JOIN ${keysOf(this.qualified(table))} k ON ${on}) x`;
    const params = [`[${keys.join(',')}]`];
    const res = roleOf(identity)
      ? await this.asIdentity(identity, (q) => q.query<Record<string, unknown>>(sql, params))
      : await this.owner.query<Record<string, unknown>>(sql, params);
    for (const row of decodeRows(cols, res.rows)) {
      const key = row.__basalt_pk as string;
      delete row.__basalt_pk;
      out.set(key, row);
    }
    return out;
  }

  /** The primary-key columns of deleted rows, in the API's representation (no row is read). */
  async keys(table: Table, keys: string[]): Promise<RowsByKey> {
    const cols = table.primaryKey.map((k) => table.columns.get(k)).filter((c): c is Column => !!c);
    const out: RowsByKey = new Map();
    if (!keys.length) return out;
    const res = await this.owner.query<Record<string, unknown>>(
      `SELECT ${cols.map((c) => c.select).join(', ')}, ${KEY} FROM ${keysOf(this.qualified(table))} x`,
      [`[${keys.join(',')}]`],
    );
    for (const row of decodeRows(cols, res.rows)) {
      const key = row.__basalt_pk as string;
      delete row.__basalt_pk;
      out.set(key, row);
    }
    return out;
  }
}
