/**
 * What a subscriber sees of a changed row (docs/realtime.md, "Visibility"): the row as
 * captured at the change (to_jsonb of it, in the outbox), through the subscriber's
 * column grants and the table's row-level policies, in the Database API's value
 * representation. One statement evaluates every captured row of one table for one
 * identity, however many events and streams share them: the cost grows with
 * identities × tables per batch, never with subscribers × events.
 *
 * Which rows and columns an identity sees is PostgreSQL's answer, asked in that statement
 * as the identity: `basalt.realtime_visible` (migration 175) picks the policies as
 * PostgreSQL picks them for a SELECT by that role, from the catalog as it is at that
 * moment, and the granted columns come from `has_column_privilege` in the same statement.
 * Nothing about policies or grants is cached here: a policy dropped or a grant revoked
 * applies to the next event evaluated.
 */
import { quoteIdent, type Queryable } from '../../db/engine';
import type { Column, Table } from '../database/catalog';
import { decodeRows } from '../database/value-codec';
import { roleOf, type Identity } from './principal';

/**
 * Runs `fn` once for each identity, in one transaction, each call's statements made as its
 * identity (the Database API's identity helper, `assumeIdentity`, switched between calls).
 */
export type AsIdentities = <R>(identities: Identity[], fn: (index: number, q: Queryable) => Promise<R>) => Promise<R[]>;

/** One evaluation `visible` makes: the captured rows of one table for one identity. */
export interface VisibleAsk {
  identity: Identity;
  table: Table;
  images: string[];
}

/** Decoded rows by their position in the list handed in. */
export type RowsByIndex = Map<number, Record<string, unknown>>;

const N = '"__basalt_n"';
const GRANTED = '__basalt_cols';

interface Plan {
  sql: string;
  params: string[];
  cols: Column[];
  table: Table;
  /** Users and anon: the statement also answers the columns the identity is granted. */
  granted: boolean;
}

export class RowReader {
  constructor(
    private readonly schema: string,
    private readonly owner: Queryable,
    private readonly asIdentities: AsIdentities,
    /** Transactions evaluating users and anon at once: 1 on the embedded engine (one session anyway). */
    private readonly parallel = 1,
  ) {}

  private qualified(table: Table): string {
    return `${quoteIdent(this.schema)}.${table.quoted}`;
  }

  /**
   * Whether `identity` may read `table` now: USAGE on the schema and some column granted,
   * the primary key among them (events name rows by it). Service keys: their whitelist,
   * checked by the caller.
   */
  async mayRead(identity: Identity, table: Table): Promise<boolean> {
    const role = roleOf(identity);
    if (!role) return true;
    const { rows } = await this.owner.query<{ name: string }>(
      `SELECT a.attname AS name FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
          AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $2)
          AND has_schema_privilege($2, $3, 'USAGE')
          AND has_column_privilege($2, a.attrelid, a.attnum, 'SELECT')`,
      [this.qualified(table), role, this.schema],
    );
    const names = new Set(rows.map((r) => r.name));
    return names.size > 0 && table.primaryKey.every((k) => names.has(k));
  }

  /**
   * Of the captured rows of each ask (JSON texts of whole rows of its table), those its
   * identity may see, each as the Database API would answer it: index in `images` → row.
   * Service keys read on the platform's connection; users and anon all in one transaction,
   * switching identity between statements (one statement each). An identity that may no
   * longer read the table's primary key sees nothing. When that transaction fails (a
   * policy that errors for one identity), each is tried on its own and one that still
   * fails sees nothing of this page (logged by the caller through `onError`).
   */
  async visible(asks: VisibleAsk[], onError: (cause: unknown) => void): Promise<RowsByIndex[]> {
    const out: RowsByIndex[] = asks.map(() => new Map());
    const plans = asks.map((a) => this.plan(a));
    const service: number[] = [];
    const roles: number[] = [];
    asks.forEach((a, i) => {
      if (plans[i]) (roleOf(a.identity) ? roles : service).push(i);
    });
    const take = (i: number, rows: Record<string, unknown>[]) => {
      const plan = plans[i]!;
      if (!rows.length) return;
      let cols = plan.cols;
      if (plan.granted) {
        const granted = new Set(JSON.parse(String(rows[0]![GRANTED])) as string[]);
        if (!plan.table.primaryKey.every((k) => granted.has(k))) return;
        cols = cols.filter((c) => granted.has(c.name));
        for (const row of rows) {
          delete row[GRANTED];
          for (const c of plan.cols) if (!granted.has(c.name)) delete row[c.name];
        }
      }
      for (const row of decodeRows(cols, rows)) {
        const n = Number(row.__basalt_n) - 1;
        delete row.__basalt_n;
        out[i]!.set(n, row);
      }
    };
    const serviceReads = service.map(async (i) =>
      take(i, (await this.owner.query<Record<string, unknown>>(plans[i]!.sql, plans[i]!.params)).rows),
    );
    const read = (i: number, q: Queryable) =>
      q.query<Record<string, unknown>>(plans[i]!.sql, plans[i]!.params).then((r) => r.rows);
    // Chunks run in parallel transactions (external PostgreSQL: one connection each).
    const size = Math.ceil(roles.length / this.parallel);
    const chunks: number[][] = [];
    for (let k = 0; k < roles.length; k += size) chunks.push(roles.slice(k, k + size));
    await Promise.all(
      chunks.map(async (chunk) => {
        try {
          const results = await this.asIdentities(
            chunk.map((i) => asks[i]!.identity),
            (k, q) => read(chunk[k]!, q),
          );
          for (let k = 0; k < results.length; k++) take(chunk[k]!, results[k]!);
        } catch {
          for (const i of chunk) {
            try {
              const [rows] = await this.asIdentities([asks[i]!.identity], (_k, q) => read(i, q));
              take(i, rows!);
            } catch (e) {
              onError(e);
            }
          }
        }
      }),
    );
    await Promise.all(serviceReads);
    return out;
  }

  /**
   * The statement of one ask, or undefined when there is nothing to evaluate. Service keys:
   * every captured row, every column. Users and anon: the rows `basalt.realtime_visible`
   * lets the identity see, every column of the table with the names of those granted to
   * it (the columns not granted are dropped before anything is sent).
   */
  private plan(a: VisibleAsk): Plan | undefined {
    const cols = a.table.columnList;
    if (!a.images.length || !cols.length) return undefined;
    const rel = this.qualified(a.table);
    // The derived table takes the table's name, as the policies see it in realtime_visible.
    const images = `(SELECT j.n AS ${N}, r.* FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY j(value, n),
                   jsonb_populate_record(NULL::${rel}, j.value) r) AS ${a.table.quoted}`;
    const select = `${a.table.quoted}.${N}, ${cols.map((c) => c.select).join(', ')}`;
    const params = [`[${a.images.join(',')}]`];
    if (!roleOf(a.identity))
      return { sql: `SELECT ${select} FROM ${images}`, params, cols, table: a.table, granted: false };
    const sql = `SELECT ${select}, g.${GRANTED}
      FROM basalt.realtime_visible($2::regclass, $1::jsonb) AS v(__basalt_v)
      JOIN ${images} ON ${a.table.quoted}.${N} = v.__basalt_v
      CROSS JOIN (SELECT coalesce(jsonb_agg(a.attname), '[]'::jsonb)::text AS ${GRANTED}
                    FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = $2::regclass AND a.attnum > 0 AND NOT a.attisdropped
                     AND has_column_privilege($2::regclass, a.attnum, 'SELECT')) g`;
    return { sql, params: [...params, rel], cols, table: a.table, granted: true };
  }

  /** The primary-key columns of rows by their key objects (JSON texts), in the API's representation. */
  async keys(table: Table, keys: string[]): Promise<RowsByIndex> {
    const cols = table.primaryKey.map((k) => table.columns.get(k)).filter((c): c is Column => !!c);
    const out: RowsByIndex = new Map();
    if (!keys.length) return out;
    const res = await this.owner.query<Record<string, unknown>>(
      `SELECT ${N}, ${cols.map((c) => c.select).join(', ')}
         FROM (SELECT j.n AS ${N}, r.* FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY j(value, n),
                      jsonb_populate_record(NULL::${this.qualified(table)}, j.value) r) x`,
      [`[${keys.join(',')}]`],
    );
    for (const row of decodeRows(cols, res.rows)) {
      const n = Number(row.__basalt_n) - 1;
      delete row.__basalt_n;
      out.set(n, row);
    }
    return out;
  }
}
