/**
 * What a subscriber sees of a changed row (docs/realtime.md, "Visibility"): the row as
 * captured at the change (to_jsonb of it, in the outbox), through the subscriber's
 * column grants and the table's row-level policies, in the Database API's value
 * representation. One statement evaluates every captured row of one table for one
 * identity, however many events and streams share them: the cost grows with
 * identities × tables per batch, never with subscribers × events.
 *
 * Which rows and columns an identity sees is PostgreSQL's answer, asked again for every
 * page: as each role following (basalt_user, basalt_anon), one statement reads, for each
 * table of the page, `basalt.realtime_policy` (migration 175: whether row-level security
 * applies to the role and which policies PostgreSQL would pick for its SELECT, from the
 * catalog as it is then) and the columns granted (`has_column_privilege`). Nothing about
 * policies or grants is kept from one page to the next: a policy dropped or a grant
 * revoked applies to the next page evaluated.
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

type Role = 'basalt_user' | 'basalt_anon';

/** What one role sees of one table during one page: its condition (null: nothing) and columns. */
interface RoleView {
  condition: string | null;
  columns: Column[];
}

interface Plan {
  sql: string;
  params: string[];
  cols: Column[];
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
   * For each role among the asks' identities, asked as that role (one statement each, one
   * transaction): per table, the condition of `basalt.realtime_policy` and the columns
   * granted. A role that may no longer read a table's primary key sees nothing of it.
   */
  private async views(asks: VisibleAsk[]): Promise<Map<string, RoleView>> {
    const byRole = new Map<Role, { identity: Identity; tables: Map<string, Table> }>();
    for (const a of asks) {
      const role = roleOf(a.identity);
      if (!role) continue;
      let r = byRole.get(role);
      if (!r) byRole.set(role, (r = { identity: a.identity, tables: new Map() }));
      r.tables.set(a.table.name, a.table);
    }
    const out = new Map<string, RoleView>();
    if (!byRole.size) return out;
    const roles = [...byRole.entries()];
    const results = await this.asIdentities(
      roles.map(([, r]) => r.identity),
      (k, q) =>
        q.query<{ name: string; cond: string | null; cols: string }>(
          `SELECT u.name, basalt.realtime_policy(u.rel::regclass) AS cond,
                  (SELECT coalesce(jsonb_agg(a.attname), '[]'::jsonb)::text FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = u.rel::regclass AND a.attnum > 0 AND NOT a.attisdropped
                      AND has_column_privilege(u.rel::regclass, a.attnum, 'SELECT')) AS cols
             FROM jsonb_to_recordset($1::jsonb) AS u(name text, rel text)`,
          [JSON.stringify([...roles[k]![1].tables.values()].map((t) => ({ name: t.name, rel: this.qualified(t) })))],
        ),
    );
    roles.forEach(([role, r], k) => {
      for (const row of results[k]!.rows) {
        const table = r.tables.get(row.name)!;
        const granted = new Set(JSON.parse(row.cols) as string[]);
        const readable = row.cond !== null && table.primaryKey.every((c) => granted.has(c));
        out.set(`${role}\u0000${row.name}`, {
          condition: readable ? row.cond : null,
          columns: table.columnList.filter((c) => granted.has(c.name)),
        });
      }
    });
    return out;
  }

  /**
   * Of the captured rows of each ask (JSON texts of whole rows of its table), those its
   * identity may see, each as the Database API would answer it: index in `images` → row.
   * Service keys read on the platform's connection; users and anon all in one transaction,
   * switching identity between statements (one statement each), after the roles' views of
   * the page's tables were read (`views`). When that transaction fails (a policy that
   * errors for one identity), each is tried on its own and one that still fails sees
   * nothing of this page (logged by the caller through `onError`), as does every identity
   * when the views cannot be read.
   */
  async visible(asks: VisibleAsk[], onError: (cause: unknown) => void): Promise<RowsByIndex[]> {
    const out: RowsByIndex[] = asks.map(() => new Map());
    let views: Map<string, RoleView>;
    try {
      views = await this.views(asks);
    } catch (e) {
      views = new Map();
      onError(e);
    }
    const plans = asks.map((a) => {
      const role = roleOf(a.identity);
      return this.plan(a, role ? (views.get(`${role}\u0000${a.table.name}`) ?? null) : undefined);
    });
    const service: number[] = [];
    const roles: number[] = [];
    asks.forEach((a, i) => {
      if (plans[i]) (roleOf(a.identity) ? roles : service).push(i);
    });
    const take = (i: number, rows: Record<string, unknown>[]) => {
      for (const row of decodeRows(plans[i]!.cols, rows)) {
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
   * The statement of one ask, or undefined when there is nothing to evaluate. `view`:
   * undefined for a service key (every row, every column), null when the role's view could
   * not be read (nothing).
   */
  private plan(a: VisibleAsk, view: RoleView | null | undefined): Plan | undefined {
    if (view === null || view?.condition === null) return undefined;
    const cols = view ? view.columns : a.table.columnList;
    if (!a.images.length || !cols.length) return undefined;
    // The derived table takes the table's name, so a policy's `notes.owner_id` finds its column.
    const sql = `SELECT ${N}, ${cols.map((c) => c.select).join(', ')}
      FROM (SELECT j.n AS ${N}, r.* FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY j(value, n),
                   jsonb_populate_record(NULL::${this.qualified(a.table)}, j.value) r) AS ${a.table.quoted}
     WHERE ${view ? view.condition : 'true'}`;
    return { sql, params: [`[${a.images.join(',')}]`], cols };
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
