/**
 * What a subscriber sees of a changed row (docs/realtime.md, "Visibility"): the row as
 * captured at the change (to_jsonb of it, in the outbox), through the subscriber's
 * column grants and the table's row-level policies, in the Database API's value
 * representation. One statement evaluates every captured row of one table for one
 * identity, however many events and streams share them: the cost grows with
 * identities × tables per batch, never with subscribers × events.
 *
 * Policies are PostgreSQL's own (pg_policy), applied to the captured rows as PostgreSQL
 * applies them to a SELECT: with row-level security on, the USING expressions of the
 * SELECT and ALL policies that apply to the role, permissive ones OR-ed, restrictive
 * ones AND-ed, none permissive → no row. The expressions run as the identity (role,
 * `basalt.uid()`, `basalt.jwt()` set locally), so a subquery in a policy reads other
 * tables under that identity's own grants and policies, as it would on the table.
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
  loadedAt: number;
}

/** Decoded rows by their position in the list handed in. */
export type RowsByIndex = Map<number, Record<string, unknown>>;

const N = '"__basalt_n"';

interface RoleView {
  at: number;
  columns: Column[];
  /** The policies' combined USING condition, or 'true' when row-level security is off. */
  condition: string;
}

export class RowReader {
  private views = new Map<string, RoleView>();

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

  /** The columns a role may select and the policies it reads under, per catalog load. */
  private async view(role: string, table: Table, loadedAt: number): Promise<RoleView> {
    const k = `${role}\u0000${table.name}`;
    const hit = this.views.get(k);
    if (hit && hit.at === loadedAt) return hit;
    const [cols, pol] = await Promise.all([
      this.owner.query<{ name: string }>(
        `SELECT a.attname AS name FROM pg_catalog.pg_attribute a
          WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
            AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $2)
            AND has_column_privilege($2, a.attrelid, a.attnum, 'SELECT')`,
        [this.qualified(table), role],
      ),
      this.owner.query<{ rls: boolean; permissive: string[] | string; restrictive: string[] | string }>(
        `WITH p AS (
           SELECT p.polpermissive, '(' || pg_get_expr(p.polqual, p.polrelid) || ')' AS expr
             FROM pg_catalog.pg_policy p
            WHERE p.polrelid = $1::regclass AND p.polcmd IN ('r', '*') AND p.polqual IS NOT NULL
              AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $2)
              AND (0::oid = ANY (p.polroles)
                   OR EXISTS (SELECT 1 FROM unnest(p.polroles) r WHERE pg_has_role($2, r, 'MEMBER'))))
         SELECT c.relrowsecurity AS rls,
                coalesce((SELECT array_agg(expr) FROM p WHERE polpermissive), '{}') AS permissive,
                coalesce((SELECT array_agg(expr) FROM p WHERE NOT polpermissive), '{}') AS restrictive
           FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass`,
        [this.qualified(table), role],
      ),
    ]);
    const names = new Set(cols.rows.map((r) => r.name));
    const r = pol.rows[0];
    const list = (v: string[] | string | undefined) => (Array.isArray(v) ? v : v ? parseTextArray(v) : []);
    const permissive = list(r?.permissive);
    const restrictive = list(r?.restrictive);
    const condition = !r?.rls
      ? 'true'
      : `(${permissive.length ? permissive.join(' OR ') : 'false'})${restrictive.map((x) => ` AND ${x}`).join('')}`;
    const view = { at: loadedAt, columns: table.columnList.filter((c) => names.has(c.name)), condition };
    if (this.views.size > 10_000) this.views.clear();
    this.views.set(k, view);
    return view;
  }

  /** The columns `identity` reads of `table`: all for service keys, the role's column grants otherwise. */
  async columns(identity: Identity, table: Table, loadedAt: number): Promise<Column[]> {
    const role = roleOf(identity);
    return role ? (await this.view(role, table, loadedAt)).columns : table.columnList;
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

  /**
   * Of the captured rows of each ask (JSON texts of whole rows of its table), those its
   * identity may see, each as the Database API would answer it: index in `images` → row.
   * Service keys read on the platform's connection; users and anon all in one transaction,
   * switching identity between statements (two statements each instead of four). When that
   * transaction fails (a policy that errors for one identity), each is tried on its own and
   * one that still fails sees nothing of this page (logged by the caller through `onError`).
   */
  async visible(asks: VisibleAsk[], onError: (cause: unknown) => void): Promise<RowsByIndex[]> {
    const out: RowsByIndex[] = asks.map(() => new Map());
    const plans = await Promise.all(asks.map((a) => this.plan(a)));
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

  /** The statement of one ask, or undefined when there is nothing to evaluate. */
  private async plan(a: VisibleAsk): Promise<{ sql: string; params: string[]; cols: Column[] } | undefined> {
    const role = roleOf(a.identity);
    const view = role ? await this.view(role, a.table, a.loadedAt) : undefined;
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

/** text[] in its text form (a driver that does not parse it): `{"(a = b)","(c)"}`. */
function parseTextArray(text: string): string[] {
  const out: string[] = [];
  let i = 1;
  while (i < text.length - 1) {
    if (text[i] === '"') {
      let s = '';
      i++;
      while (text[i] !== '"') {
        if (text[i] === '\\') i++;
        s += text[i++];
      }
      out.push(s);
      i += 2;
    } else {
      const end = text.indexOf(',', i);
      const stop = end === -1 ? text.length - 1 : end;
      out.push(text.slice(i, stop));
      i = stop + 1;
    }
  }
  return out;
}
