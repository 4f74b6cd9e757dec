/**
 * The Access view of a table (docs/admin-api.md, Data browser → Access): what
 * `basalt_user` and `basalt_anon` may do with it, whether row-level security is on, its
 * policies, and the warnings an operator would want — all read from the catalog — and
 * "try as a user": a select run exactly as a site user (or anon) would run it through the
 * Database API, to see the rows they would see.
 */
import type { Static } from 'elysia';
import type { Basalt } from '../../services';
import type { IdentityRole, Table } from '../database/catalog';
import { ANON, DB_ROLES, userIdentity } from '../database/identity';
import type { DbCaller } from '../database/caller';
import type { QueryBody, QueryResultData } from '../database/model';
import { AdminErrors } from './errors';
import { isUuid } from '../../util/uuid';
import { basename } from 'node:path';
import { PgError, type Queryable } from '../../db/engine';
import { enabledTables } from '../realtime/outbox';
import type { Actor } from './audit';
import type { Bodies } from './model';
import {
  accessStatements,
  applyAsMigration,
  boundLocks,
  forget,
  LOCK_REFUSED,
  type AccessChange,
  type AppliedChange,
} from './data-access-changes';

export interface Policy {
  name: string;
  command: 'ALL' | 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';
  permissive: boolean;
  roles: string[];
  using: string | null;
  with_check: string | null;
}

export interface RoleAccess {
  delete: boolean;
  /** Column → the privileges the role holds on it (table-level grants count for every column). */
  columns: Record<string, ('SELECT' | 'INSERT' | 'UPDATE')[]>;
}

export interface TableAccess {
  table: string;
  rls: boolean;
  /** The table emits realtime changes (basalt.realtime_enable). */
  realtime: boolean;
  roles: Record<'basalt_user' | 'basalt_anon', RoleAccess | null>;
  policies: Policy[];
  warnings: { code: 'rls_disabled' | 'policy_column_unindexed'; message: string; column?: string }[];
}

export const POLICIES_SQL = `
SELECT pol.polname AS name,
       CASE pol.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END AS command,
       pol.polpermissive AS permissive,
       to_jsonb(ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE pg_catalog.pg_get_userbyid(r)::text END
                        FROM unnest(pol.polroles) r ORDER BY 1)) AS roles,
       pg_catalog.pg_get_expr(pol.polqual, pol.polrelid) AS using,
       pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid) AS with_check
  FROM pg_catalog.pg_policy pol
  JOIN pg_catalog.pg_class c ON c.oid = pol.polrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relname = $2
 ORDER BY pol.polname`;

// Columns a policy expression reads (recorded in pg_depend) that lead no index of the table.
const UNINDEXED_SQL = `
SELECT DISTINCT a.attname AS column
  FROM pg_catalog.pg_policy pol
  JOIN pg_catalog.pg_class c ON c.oid = pol.polrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_policy'::regclass AND d.objid = pol.oid
       AND d.refobjid = pol.polrelid AND d.refobjsubid > 0
  JOIN pg_catalog.pg_attribute a ON a.attrelid = pol.polrelid AND a.attnum = d.refobjsubid
 WHERE n.nspname = $1 AND c.relname = $2
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = pol.polrelid AND i.indkey[0] = a.attnum)
 ORDER BY 1`;

function roleAccess(table: Table, role: IdentityRole): RoleAccess | null {
  const p = table.privileges[role];
  if (!p) return null;
  const columns: RoleAccess['columns'] = {};
  for (const [name, c] of p.columns) {
    const list: RoleAccess['columns'][string] = [];
    if (c.select) list.push('SELECT');
    if (c.insert) list.push('INSERT');
    if (c.update) list.push('UPDATE');
    columns[name] = list;
  }
  return { delete: p.delete, columns };
}

/** A site user's id (null or absent: anon) and the select's fields, as the route takes them. */
export type TryAs = Static<typeof Bodies.tryAs>;

/** Thrown to roll a preview's transaction back; caught where it is thrown. */
const PREVIEWED = new Error('access preview: rolled back');

/** A PostgreSQL refusal of a change as the admin API's field error; anything else as it is. */
function refused(e: unknown): unknown {
  if (e instanceof PgError && e.code === '55P03') return AdminErrors.conflict(LOCK_REFUSED);
  return e instanceof PgError ? AdminErrors.field('changes', `PostgreSQL refused the change: ${e.message}`) : e;
}

export function createDataAccess(p: Basalt) {
  const db = () => p.services.database;
  const schema = () => db().catalog.schema;

  /** The table from a fresh catalog (grants change with migrations and the panel), or 404. */
  async function table(name: string): Promise<Table> {
    const snap = await db().catalog.refresh();
    const t = snap.tables.get(name);
    if (!t) throw AdminErrors.notFound(`Table '${name}'`);
    return t;
  }

  return {
    async access(name: string, q: Queryable = p.db): Promise<TableAccess> {
      const t = await table(name);
      const [policies, unindexed, emitting] = await Promise.all([
        q.query<Policy>(POLICIES_SQL, [schema(), name]),
        q.query<{ column: string }>(UNINDEXED_SQL, [schema(), name]),
        enabledTables(q, schema()),
      ]);
      const warnings: TableAccess['warnings'] = [];
      for (const role of ['user', 'anon'] as const)
        if (t.privileges[role] && !t.rls)
          warnings.push({
            code: 'rls_disabled',
            message: `Granted to ${DB_ROLES[role]} with row-level security disabled: every row is reachable by ${role === 'user' ? 'every signed-in user' : 'anyone'}.`,
          });
      for (const { column } of unindexed.rows)
        warnings.push({
          code: 'policy_column_unindexed',
          column,
          message: `A policy reads column '${column}', and no index starts with that column: every query under the policy scans the table.`,
        });
      return {
        table: name,
        rls: t.rls,
        realtime: emitting.has(name),
        roles: { basalt_user: roleAccess(t, 'user'), basalt_anon: roleAccess(t, 'anon') },
        policies: policies.rows.map((r) => ({ ...r, roles: [...r.roles] })),
        warnings,
      };
    },

    /**
     * Change the access rules of `name` (data-access-changes.ts): one audited transaction
     * (`data.access`, or `data.realtime` when only realtime changes), the statements also
     * written as a migration file. Answers the table's access afterwards and the file.
     */
    async change(
      actor: Actor,
      name: string,
      changes: AccessChange[],
    ): Promise<{ access: TableAccess; migration: { file: string; statements: string[] } }> {
      // Read before the transaction: on the embedded engine it holds the only session.
      const t = await table(name);
      const what = changes.every((c) => c.op === 'realtime') ? 'realtime' : 'access';
      let written: string | undefined;
      let applied: AppliedChange;
      try {
        applied = await p.services.admin.audited(actor, `data.${what}`, async (tx, note) => {
          const statements = await accessStatements(tx, schema(), t, changes);
          const done = await applyAsMigration(p, tx, name, what, statements);
          written = done.file;
          note(name, { changes, migration: basename(done.file) });
          return done;
        });
      } catch (e) {
        forget(written);
        throw refused(e);
      }
      await db().catalog.refresh();
      return { access: await this.access(name), migration: applied };
    },

    /**
     * The statements `changes` would run on `name`, checked as `change` checks them and run in
     * a transaction that is always rolled back: the panel stages a change with them (its SQL
     * shown before it runs, a refusal named in the form), then applies every staged change
     * at once as one migration. Nothing is changed, so nothing is audited.
     */
    async preview(name: string, changes: AccessChange[]): Promise<{ statements: string[] }> {
      const t = await table(name);
      let statements: string[] = [];
      try {
        await p.db.transaction(async (tx) => {
          await boundLocks(tx);
          statements = await accessStatements(tx, schema(), t, changes);
          for (const st of statements) await tx.query(st);
          throw PREVIEWED;
        });
      } catch (e) {
        if (e !== PREVIEWED) throw refused(e);
      }
      return { statements };
    },

    /**
     * A select on `name` as a site user or anon, through the Database API's own checks and
     * identity (read-only: the action is always select). 404 for an unknown user id.
     */
    async tryAs(name: string, body: TryAs): Promise<QueryResultData & { as: string }> {
      let caller: DbCaller = { kind: 'anon', key: null };
      let as = 'anon';
      if (body.user_id !== undefined && body.user_id !== null) {
        if (!isUuid(String(body.user_id)))
          throw AdminErrors.field('user_id', 'must be a site user id (a UUID), or null for anon');
        const row = await p.services.auth.userDetail(String(body.user_id));
        if (!row) throw AdminErrors.notFound('Site user');
        as = row.email;
        const claims = { sub: row.id, email: row.email, email_verified: row.email_verified_at !== null, try_as: true };
        caller = {
          kind: 'user',
          user: { userId: row.id, sessionId: '', email: row.email },
          identity: userIdentity(row.id, claims),
        };
      }
      if (!db().identities) throw AdminErrors.notSupported("Users' own data is off on this instance (see the log).");
      const query = { entity: name, action: 'select', filters: body.filters, sort: body.sort, limit: body.limit };
      for (const k of ['filters', 'sort', 'limit'] as const) if (query[k] === undefined) delete query[k];
      // The Database API's builder checks every field as it would a public request's.
      const out = await db().query(caller, query as QueryBody);
      return { ...out, as: caller.kind === 'anon' ? ANON.role : as };
    },
  };
}

export type DataAccess = ReturnType<typeof createDataAccess>;
