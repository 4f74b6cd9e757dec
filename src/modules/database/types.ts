/**
 * TypeScript declarations of the data schema as one caller sees it (docs/client.md,
 * "Types"): for each table the role may reach, `Row` (the columns it may read, typed as
 * the Database API returns them: docs/database.md, Value representation), `Insert` (the
 * columns it may insert; those with a default, or nullable, optional), `Update` (the
 * columns it may update, all optional) and `Relations` (the names `expand` takes, each to
 * the table it reaches). The text exports `DB`, read by the JS client's `createClient<DB>`.
 * Printed by `basalt types` and served by the admin API (GET /api/admin/data/types).
 */
import type { Queryable } from '../../db/engine';
import type { CatalogSnapshot, Column, Table } from './catalog';

/** Whose view: a signed-in user (`basalt_user`), anon (`basalt_anon`), or a service key (every table). */
export type TypesRole = 'user' | 'anon' | 'service';
export const TYPES_ROLES: readonly TypesRole[] = ['user', 'anon', 'service'];

// Foreign keys inside the data schema, by their first column (the relation's name: docs/database.md).
const RELATIONS_SQL = `
SELECT src.relname AS table_name, a.attname AS column_name, dst.relname AS target
  FROM pg_catalog.pg_constraint k
  JOIN pg_catalog.pg_class src ON src.oid = k.conrelid
  JOIN pg_catalog.pg_namespace ns ON ns.oid = src.relnamespace
  JOIN pg_catalog.pg_class dst ON dst.oid = k.confrelid
  JOIN pg_catalog.pg_namespace nd ON nd.oid = dst.relnamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
 WHERE k.contype = 'f' AND ns.nspname = $1 AND nd.nspname = $1
 ORDER BY 1, 2`;

const OUT: Record<Column['kind'], string> = {
  int: 'number',
  float: 'number',
  bigint: 'string',
  numeric: 'string',
  bool: 'boolean',
  json: 'unknown',
  text: 'string',
  bytea: 'string',
  uuid: 'string',
  timestamptz: 'string',
  timestamp: 'string',
  date: 'string',
  other: 'string',
};
/** What a write accepts where it differs from what a read returns (bigint and numeric also as numbers). */
const IN: Partial<Record<Column['kind'], string>> = { bigint: 'string | number', numeric: 'string | number' };

const key = (name: string) => (/^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name));

function typeOf(c: Column, input: boolean): string {
  const base = (input && IN[c.kind]) || OUT[c.kind];
  const value = c.isArray ? `(${base} | null)[]` : base;
  return c.notNull ? value : `${value} | null`;
}

function fields(cols: Column[], input: boolean, optional: (c: Column) => boolean): string {
  if (!cols.length) return '{}';
  return `{\n${cols.map((c) => `        ${key(c.name)}${optional(c) ? '?' : ''}: ${typeOf(c, input)};`).join('\n')}\n      }`;
}

/** Which columns `role` may select, insert and update on `t`; null when it reaches nothing there. */
function reach(t: Table, role: TypesRole): { select: Column[]; insert: Column[]; update: Column[] } | null {
  if (role === 'service') return { select: t.columnList, insert: t.columnList, update: t.columnList };
  const p = t.privileges[role];
  if (!p) return null;
  const by = (use: 'select' | 'insert' | 'update') => t.columnList.filter((c) => p.columns.get(c.name)?.[use]);
  return { select: by('select'), insert: by('insert'), update: by('update') };
}

/**
 * The declarations for `role`, from the catalog snapshot and the schema's foreign keys;
 * `whitelist`: a service key's tables, the only ones it reaches.
 */
export async function databaseTypes(
  db: Queryable,
  snap: CatalogSnapshot,
  schema: string,
  role: TypesRole,
  whitelist?: readonly string[],
): Promise<string> {
  const { rows } = await db.query<{ table_name: string; column_name: string; target: string }>(RELATIONS_SQL, [schema]);
  const tables = [...snap.tables.values()]
    .filter((t) => !whitelist || whitelist.includes(t.name))
    .map((t) => ({ t, r: reach(t, role) }))
    .filter((x) => x.r)
    .sort((a, b) => (a.t.name < b.t.name ? -1 : 1));
  const reachable = new Set(tables.filter((x) => x.r!.select.length).map((x) => x.t.name));
  const relations = new Map<string, string[]>();
  const add = (table: string, name: string, target: string) => {
    if (reachable.has(table) && reachable.has(target))
      (relations.get(table) ?? relations.set(table, []).get(table)!).push(`${key(name)}: ${JSON.stringify(target)};`);
  };
  for (const fk of rows) {
    add(fk.table_name, fk.column_name, fk.target);
    add(fk.target, `${fk.table_name}_via_${fk.column_name}`, fk.table_name);
  }
  const body = tables.map(({ t, r }) => {
    const rels = relations.get(t.name) ?? [];
    return [
      `    ${key(t.name)}: {`,
      `      Row: ${fields(r!.select, false, () => false)};`,
      `      Insert: ${fields(r!.insert, true, (c) => c.hasDefault || !c.notNull)};`,
      `      Update: ${fields(r!.update, true, () => true)};`,
      `      Relations: ${rels.length ? `{ ${rels.join(' ')} }` : '{}'};`,
      '    };',
    ].join('\n');
  });
  return [
    `// The data schema "${schema}" as ${role === 'service' ? 'a service key' : `the ${role} role (basalt_${role})`} sees it.`,
    `// Generated by \`basalt types --role ${role}\`; pass it to the client: createClient<DB>(url) (docs/client.md).`,
    'export type DB = {',
    '  tables: {',
    ...body,
    '  };',
    '};',
    '',
  ].join('\n');
}
