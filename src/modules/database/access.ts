/**
 * Grants of users' own data (docs/database.md, "Users' own data"): before a user's or
 * anon's request is built, every column it names is checked against what the catalog says
 * the role may do with it, so a refusal names the column (403 `forbidden`) instead of
 * reaching Postgres as a permission error. Postgres still enforces the same grants and
 * the row-level policies on the statement itself; this is the early, explainable answer.
 *
 * A name the table does not have answers like an ungranted one: the grants never reveal
 * which columns exist.
 */
import type { Column, IdentityRole, Table, TablePrivileges } from './catalog';
import { DbErrors } from './errors';
import { DB_ROLES } from './identity';
import type { Action, QueryBody } from './model';
import type { Access } from './query-builder';

type Use = 'select' | 'insert' | 'update';
const VERB: Record<Use, string> = { select: 'read', insert: 'insert', update: 'update' };

/** Whether `role` holds anything at all on the table (else it answers like a whitelist miss). */
export function holdsAnything(table: Table | undefined, role: IdentityRole): boolean {
  return !!table?.privileges[role];
}

function need(table: Table, p: TablePrivileges, name: unknown, use: Use): void {
  if (typeof name !== 'string') return; // the shape is the query builder's business (400)
  if (!p.columns.get(name)?.[use]) throw DbErrors.columnNotGranted(table.name, name, VERB[use]);
}

function dataKeys(data: unknown): string[] {
  const rows = Array.isArray(data) ? data : data === undefined ? [] : [data];
  const keys = new Set<string>();
  for (const r of rows)
    if (typeof r === 'object' && r !== null && !Array.isArray(r)) for (const k of Object.keys(r)) keys.add(k);
  return [...keys];
}

/**
 * Check `body` against the grants of `role` on `table`; returns the body to build, with
 * `fields` filled in when the request leaves it out: the columns the role may read (a
 * role that may read none gets writes answered without rows, `returning: false`).
 */
export function authorize(body: QueryBody, table: Table, role: IdentityRole): { body: QueryBody; returning: boolean } {
  const p = table.privileges[role];
  if (!p) throw DbErrors.notGranted(table.name, DB_ROLES[role]);
  const action = body.action as Action;
  const readable = table.columnList.filter((c) => p.columns.get(c.name)?.select).map((c) => c.name);
  switch (action) {
    case 'select':
    case 'aggregate':
      if (!readable.length) throw DbErrors.notGranted(table.name, DB_ROLES[role]);
      break;
    case 'insert':
      if (![...p.columns.values()].some((c) => c.insert)) throw DbErrors.notGranted(table.name, DB_ROLES[role]);
      for (const k of dataKeys(body.data)) need(table, p, k, 'insert');
      break;
    case 'update':
      if (![...p.columns.values()].some((c) => c.update)) throw DbErrors.notGranted(table.name, DB_ROLES[role]);
      for (const k of dataKeys(body.data)) need(table, p, k, 'update');
      break;
    case 'delete':
      if (!p.delete) throw DbErrors.notGranted(table.name, DB_ROLES[role]);
      break;
    default:
      return { body, returning: true }; // an unknown action: the builder answers 400
  }
  // The columns read (fields, filters, sort, relations, groups) are checked as the statement is
  // built (`readAs`); a write's RETURNING without fields reads what the role may read.
  return { body, returning: action === 'select' || action === 'aggregate' || readable.length > 0 };
}

/**
 * What `role` may read, for the query builder: every table and column a statement reaches
 * (the entity's, a relation's, a path's) is checked against the role's grants, a refusal
 * naming it; a relation without `fields` reads the columns granted.
 */
export function readAs(role: IdentityRole): Access {
  return {
    read(table: Table, column?: string) {
      const p = table.privileges[role];
      if (!p) throw DbErrors.notGranted(table.name, DB_ROLES[role]);
      if (column !== undefined) need(table, p, column, 'select');
    },
    readable(table: Table): Column[] {
      const p = table.privileges[role];
      const cols = p ? table.columnList.filter((c) => p.columns.get(c.name)?.select) : [];
      if (!cols.length) throw DbErrors.notGranted(table.name, DB_ROLES[role]);
      return cols;
    },
  };
}

/** What a service key may read: every table reached must be in its whitelist (403 naming it). */
export function readWithin(tables: readonly string[]): Access {
  return {
    read(table: Table) {
      if (!tables.includes(table.name)) throw DbErrors.forbidden(table.name);
    },
    readable: (table: Table) => table.columnList,
  };
}
