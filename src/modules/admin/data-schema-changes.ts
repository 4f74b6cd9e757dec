/**
 * The schema editor's changes (docs/admin-api.md, "Schema editor"): create a table, add,
 * rename, drop and alter columns, unique and check constraints, foreign keys and indexes,
 * each turned into SQL statements and the warnings an operator wants before it runs.
 *
 * The changes run one after the other in the caller's transaction, so a later change sees
 * the tables and columns an earlier one made; each change's warnings are read just before
 * its statements run (rows a new constraint would refuse are counted then). Names are
 * checked (a new one: letters, digits and `_`; an existing one: looked up in the catalog
 * inside the transaction) and always quoted; values of defaults are literals with their
 * quotes doubled; types must match a plain type-name shape and resolve through
 * `to_regtype` (pseudo-types refused); a check expression is SQL an administrator writes,
 * parsed alone first as a policy's is (data-access-changes.ts), so it cannot end the
 * statement and add another, and refused when it calls an unsafe function.
 */
import type { Static } from 'elysia';
import { PgError, type Queryable } from '../../db/engine';
import { enabledTables } from '../realtime/outbox';
import { LOCK_REFUSED, accessStatements, ident, literal, unsafeCalls, type AccessChange } from './data-access-changes';
import { AdminErrors } from './errors';
import type { Bodies } from './model';

export type SchemaChange = Static<typeof Bodies.schema>['changes'][number];
type ColumnSpec = Extract<SchemaChange, { op: 'add_column' }>['column'];
type ColumnDefault = NonNullable<ColumnSpec['default']>;

export type SchemaWarningCode =
  | 'table_rewrite'
  | 'dependent_views'
  | 'dependent_policies'
  | 'dependent_indexes'
  | 'dependent_foreign_keys'
  | 'api_keys'
  | 'realtime'
  | 'hooks'
  | 'data_refused';

export interface SchemaWarning {
  /** Index of the change in the list sent. */
  change: number;
  code: SchemaWarningCode;
  message: string;
  /** Rows concerned (data_refused: the rows the new rule refuses; table_rewrite: the estimate). */
  count?: number;
}

export interface SchemaStatements {
  statements: string[];
  warnings: SchemaWarning[];
}

/** A table at least this large (estimated rows or bytes) is worth a warning before a rewrite. */
export const LARGE_TABLE = { rows: 10_000, bytes: 64 * 1024 * 1024 };

/** A new name: what the Database API, the JS client's types and a URL take without surprise. */
const NEW_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const NAME_RULE = 'must start with a letter or _ and hold only letters, digits and _ (at most 63)';
/** A type as written: a name (several words, a schema), an optional modifier, an optional []. */
const TYPE_SHAPE = /^[A-Za-z_][A-Za-z0-9_ .]{0,62}(\(\s*\d{1,4}\s*(,\s*\d{1,4}\s*)?\))?(\s*\[\])?$/;

const ON_DELETE: Record<string, string> = {
  'no action': 'NO ACTION',
  restrict: 'RESTRICT',
  cascade: 'CASCADE',
  'set null': 'SET NULL',
  'set default': 'SET DEFAULT',
};

interface Rel {
  oid: string;
  rows: number;
  bytes: number;
}
interface Attr {
  attnum: number;
  typid: string;
  type: string;
}

/** Thrown for a change PostgreSQL refused: the field, and PostgreSQL's words. */
function refusedChange(at: string, e: PgError, warnings: SchemaWarning[], i: number): unknown {
  if (e.code === '55P03') return AdminErrors.conflict(LOCK_REFUSED);
  const counted = warnings.find((w) => w.change === i && w.code === 'data_refused');
  // PostgreSQL's detail names what stands in the way (the view that reads a column, …).
  const detail = e.detail.detail ? ` ${e.detail.detail.replace(/\s+/g, ' ')}` : '';
  return AdminErrors.field(
    at,
    `PostgreSQL refused the change: ${e.message}.${detail}${counted ? ` (${counted.message})` : ''}`,
  );
}

/**
 * Run `changes` in `tx` (schema `schema`), each after its warnings were read; answer every
 * statement run, in order, and the warnings. A change PostgreSQL refuses is a 400 naming
 * `changes[i]`; the caller's transaction is then rolled back.
 */
export async function schemaStatements(
  tx: Queryable,
  schema: string,
  changes: SchemaChange[],
): Promise<SchemaStatements> {
  const statements: string[] = [];
  const warnings: SchemaWarning[] = [];
  const q = (table: string) => `${ident(schema)}.${ident(table)}`;

  const newName = (at: string, name: string) => {
    if (!NEW_NAME.test(name)) throw AdminErrors.field(at, NAME_RULE);
    return name;
  };
  const relation = async (at: string, table: string): Promise<Rel> => {
    const { rows } = await tx.query<{ oid: string; rows: number; bytes: number }>(
      `SELECT c.oid::int8::text AS oid, GREATEST(c.reltuples, 0)::float8 AS rows, pg_catalog.pg_table_size(c.oid)::float8 AS bytes
         FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
      [schema, table],
    );
    if (!rows[0]) throw AdminErrors.field(at, `no table '${table}' in schema ${schema}`);
    return { oid: rows[0].oid, rows: Number(rows[0].rows), bytes: Number(rows[0].bytes) };
  };
  const attribute = async (at: string, rel: Rel, table: string, column: string): Promise<Attr> => {
    const { rows } = await tx.query<Attr>(
      `SELECT attnum, atttypid::int8::text AS typid, pg_catalog.format_type(atttypid, atttypmod) AS type
         FROM pg_catalog.pg_attribute WHERE attrelid = $1::int8::oid AND attname = $2 AND attnum > 0 AND NOT attisdropped`,
      [rel.oid, column],
    );
    if (!rows[0]) throw AdminErrors.field(at, `no column '${column}' in table '${table}'`);
    return rows[0];
  };
  /** The type as PostgreSQL spells it, or a 400 naming `at`. */
  const checkType = async (at: string, text: string): Promise<{ sql: string; oid: string }> => {
    const t = text.trim().replace(/\s+/g, ' ');
    if (!TYPE_SHAPE.test(t))
      throw AdminErrors.field(at, `'${text}' is not a type name (e.g. text, bigint, numeric(10,2), uuid, text[])`);
    let row: { oid: string; typtype: string; name: string; platform: boolean } | undefined;
    try {
      await tx.query('SAVEPOINT basalt_type_check');
      row = (
        await tx.query<{ oid: string; typtype: string; name: string; platform: boolean }>(
          `SELECT t.oid::int8::text AS oid, t.typtype, pg_catalog.format_type(t.oid, NULL) AS name,
                  n.nspname = 'basalt' AS platform
             FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
            WHERE t.oid = pg_catalog.to_regtype($1)`,
          [t],
        )
      ).rows[0];
      await tx.query('RELEASE SAVEPOINT basalt_type_check');
    } catch (e) {
      if (!(e instanceof PgError)) throw e;
      await tx.query('ROLLBACK TO SAVEPOINT basalt_type_check');
      await tx.query('RELEASE SAVEPOINT basalt_type_check');
    }
    if (!row) throw AdminErrors.field(at, `unknown type '${text}'`);
    if (row.typtype === 'p') throw AdminErrors.field(at, `'${text}' is a pseudo-type, not a column type`);
    // A platform table's row type (basalt.users) would make data depend on the platform's schema,
    // which its own migrations must stay free to change.
    if (row.platform)
      throw AdminErrors.field(at, `'${text}' is a type of the platform's schema (basalt), not a column type`);
    // A modifier is kept as written (its shape is checked); otherwise PostgreSQL's own spelling.
    return { sql: t.includes('(') ? t : row.name, oid: row.oid };
  };
  const defaultSql = (d: ColumnDefault) => ('value' in d ? literal(d.value) : d.expression);
  const count = async (sql: string, params: unknown[] = []) =>
    Number((await tx.query<{ n: string }>(sql, params)).rows[0]?.n ?? 0);

  const columnSql = async (at: string, c: ColumnSpec) => {
    let sql = `${ident(newName(`${at}.name`, c.name))} ${(await checkType(`${at}.type`, c.type)).sql}`;
    if (c.not_null) sql += ' NOT NULL';
    if (c.default) sql += ` DEFAULT ${defaultSql(c.default)}`;
    if (c.unique) sql += ' UNIQUE';
    if (c.references) {
      await relation(`${at}.references.table`, c.references.table);
      sql += ` REFERENCES ${q(c.references.table)}${c.references.column ? ` (${ident(c.references.column)})` : ''}`;
      if (c.references.on_delete && c.references.on_delete !== 'no action')
        sql += ` ON DELETE ${ON_DELETE[c.references.on_delete]}`;
    }
    return sql;
  };

  /** What else reads a column: warnings for a drop, a rename or a type change. */
  const dependents = async (i: number, table: string, rel: Rel, column: string, attnum: number, what: string) => {
    const names = async (sql: string) =>
      (await tx.query<{ name: string }>(sql, [rel.oid, attnum])).rows.map((r) => r.name);
    const found: [SchemaWarningCode, string[], string][] = [
      [
        'dependent_views',
        await names(`SELECT DISTINCT v.oid::regclass::text AS name FROM pg_catalog.pg_depend d
            JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid JOIN pg_catalog.pg_class v ON v.oid = r.ev_class
           WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.refobjid = $1::int8::oid AND d.refobjsubid = $2
             AND v.oid <> $1::int8::oid ORDER BY 1`),
        'views',
      ],
      [
        'dependent_policies',
        await names(`SELECT DISTINCT pol.polname || ' on ' || pol.polrelid::regclass::text AS name FROM pg_catalog.pg_depend d
            JOIN pg_catalog.pg_policy pol ON pol.oid = d.objid
           WHERE d.classid = 'pg_catalog.pg_policy'::regclass AND d.refobjid = $1::int8::oid AND d.refobjsubid = $2 ORDER BY 1`),
        'policies',
      ],
      [
        'dependent_indexes',
        await names(`SELECT i.indexrelid::regclass::text AS name FROM pg_catalog.pg_index i
           WHERE i.indrelid = $1::int8::oid AND $2 = ANY(i.indkey::int2[]) ORDER BY 1`),
        'indexes',
      ],
      [
        'dependent_foreign_keys',
        await names(`SELECT con.conname || ' on ' || con.conrelid::regclass::text AS name FROM pg_catalog.pg_constraint con
           WHERE con.contype = 'f' AND ((con.conrelid = $1::int8::oid AND $2 = ANY(con.conkey))
              OR (con.confrelid = $1::int8::oid AND $2 = ANY(con.confkey))) ORDER BY 1`),
        'foreign keys',
      ],
    ];
    for (const [code, list, label] of found)
      if (list.length)
        warnings.push({
          change: i,
          code,
          count: list.length,
          message: `${table}.${column} is read by ${label}: ${list.join(', ')}; ${what}.`,
        });
    const keys = await count(
      `SELECT count(*) AS n FROM basalt.api_keys
        WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AND $1 = ANY(tables)`,
      [table],
    );
    if (keys)
      warnings.push({
        change: i,
        code: 'api_keys',
        count: keys,
        message: `${keys} service key${keys === 1 ? '' : 's'} whitelist${keys === 1 ? 's' : ''} table ${table}: their requests that name ${column} fail afterwards.`,
      });
    if ((await enabledTables(tx, schema)).has(table))
      warnings.push({
        change: i,
        code: 'realtime',
        message: `${table} emits realtime changes: subscribers filtering or reading ${column} see it change.`,
      });
    const { rows: hooks } = await tx.query<{ name: string }>(
      `SELECT extension || '/' || name AS name FROM basalt.hook_checkpoints WHERE source = $1 ORDER BY 1`,
      [`table:${schema}.${table}`],
    );
    if (hooks.length)
      warnings.push({
        change: i,
        code: 'hooks',
        count: hooks.length,
        message: `Extension hooks read the changes of ${table} (${hooks.map((h) => h.name).join(', ')}): a handler reading ${column} sees it change.`,
      });
  };
  const rewrite = (i: number, table: string, rel: Rel, why: string) => {
    if (rel.rows < LARGE_TABLE.rows && rel.bytes < LARGE_TABLE.bytes) return;
    warnings.push({
      change: i,
      code: 'table_rewrite',
      count: Math.round(rel.rows),
      message: `${why} rewrites ${table} (about ${Math.round(rel.rows).toLocaleString('en')} rows, ${Math.ceil(rel.bytes / 1048576)} MiB), blocking its reads and writes until it ends.`,
    });
  };
  const refuses = (i: number, n: number, what: string) => {
    if (n > 0)
      warnings.push({
        change: i,
        code: 'data_refused',
        count: n,
        message: `${n.toLocaleString('en')} row${n === 1 ? ' is' : 's are'} in the way: ${what}; the change fails until ${n === 1 ? 'it is' : 'they are'} fixed.`,
      });
  };
  /** Rows whose values of `cols` appear more than once (NULLs never clash). */
  const duplicates = async (table: string, cols: string[]) =>
    count(
      `SELECT COALESCE(sum(n), 0) AS n FROM (SELECT count(*) AS n FROM ${q(table)}
        WHERE ${cols.map((c) => `${ident(c)} IS NOT NULL`).join(' AND ')}
        GROUP BY ${cols.map(ident).join(', ')} HAVING count(*) > 1) d`,
    );
  const existingColumns = async (at: string, rel: Rel, table: string, cols: string[]) => {
    for (const [j, c] of cols.entries()) await attribute(`${at}[${j}]`, rel, table, c);
  };

  for (const [i, c] of changes.entries()) {
    const at = `changes[${i}]`;
    const mine: string[] = [];
    try {
      switch (c.op) {
        case 'create_table': {
          newName(`${at}.table`, c.table);
          const pk =
            c.primary_key === 'uuid'
              ? '"id" uuid DEFAULT gen_random_uuid() PRIMARY KEY'
              : '"id" bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY';
          const cols = [pk];
          if (c.owned) cols.push('"owner" uuid NOT NULL DEFAULT basalt.uid()');
          for (const [j, col] of c.columns.entries()) cols.push(await columnSql(`${at}.columns[${j}]`, col));
          mine.push(`CREATE TABLE ${q(c.table)} (\n  ${cols.join(',\n  ')}\n)`);
          break;
        }
        case 'add_column': {
          const rel = await relation(`${at}.table`, c.table);
          mine.push(`ALTER TABLE ${q(c.table)} ADD COLUMN ${await columnSql(`${at}.column`, c.column)}`);
          if (c.column.not_null && !c.column.default)
            refuses(
              i,
              await count(`SELECT count(*) AS n FROM ${q(c.table)}`),
              `null in the new column ${c.column.name} (NOT NULL without a default)`,
            );
          if (
            c.column.default &&
            'expression' in c.column.default &&
            c.column.default.expression === 'gen_random_uuid()'
          )
            rewrite(i, c.table, rel, `A column with a default computed per row`);
          break;
        }
        case 'rename_column': {
          const rel = await relation(`${at}.table`, c.table);
          const a = await attribute(`${at}.column`, rel, c.table, c.column);
          newName(`${at}.to`, c.to);
          await dependents(
            i,
            c.table,
            rel,
            c.column,
            a.attnum,
            `views and policies follow the new name, clients do not`,
          );
          mine.push(`ALTER TABLE ${q(c.table)} RENAME COLUMN ${ident(c.column)} TO ${ident(c.to)}`);
          break;
        }
        case 'drop_column': {
          const rel = await relation(`${at}.table`, c.table);
          const a = await attribute(`${at}.column`, rel, c.table, c.column);
          await dependents(
            i,
            c.table,
            rel,
            c.column,
            a.attnum,
            'views and policies must be changed first (PostgreSQL refuses the drop), indexes and foreign keys on it go with it',
          );
          mine.push(`ALTER TABLE ${q(c.table)} DROP COLUMN ${ident(c.column)}`);
          break;
        }
        case 'alter_column': {
          const rel = await relation(`${at}.table`, c.table);
          const a = await attribute(`${at}.column`, rel, c.table, c.column);
          const col = `ALTER TABLE ${q(c.table)} ALTER COLUMN ${ident(c.column)}`;
          if (c.type === undefined && c.not_null === undefined && c.default === undefined)
            throw AdminErrors.field(at, 'give type, not_null or default');
          if (c.type !== undefined) {
            const to = await checkType(`${at}.type`, c.type);
            if (to.oid !== a.typid) {
              const { rows } = await tx.query<{ binary: boolean }>(
                `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_cast WHERE castsource = $1::int8::oid AND casttarget = $2::int8::oid AND castmethod = 'b') AS binary`,
                [a.typid, to.oid],
              );
              if (!rows[0]?.binary) rewrite(i, c.table, rel, `Changing the type of ${c.column}`);
            }
            await dependents(
              i,
              c.table,
              rel,
              c.column,
              a.attnum,
              'views and policies must be changed first (PostgreSQL refuses the new type), indexes are rebuilt',
            );
            mine.push(`${col} TYPE ${to.sql} USING ${ident(c.column)}::${to.sql}`);
          }
          if (c.default === null) mine.push(`${col} DROP DEFAULT`);
          else if (c.default) mine.push(`${col} SET DEFAULT ${defaultSql(c.default)}`);
          if (c.not_null === true) {
            refuses(
              i,
              await count(`SELECT count(*) AS n FROM ${q(c.table)} WHERE ${ident(c.column)} IS NULL`),
              `null in ${c.column}`,
            );
            mine.push(`${col} SET NOT NULL`);
          } else if (c.not_null === false) mine.push(`${col} DROP NOT NULL`);
          break;
        }
        case 'add_unique': {
          const rel = await relation(`${at}.table`, c.table);
          await existingColumns(`${at}.columns`, rel, c.table, c.columns);
          refuses(i, await duplicates(c.table, c.columns), `the same ${c.columns.join(', ')} as another row`);
          const name = c.name ? ` CONSTRAINT ${ident(newName(`${at}.name`, c.name))}` : '';
          mine.push(`ALTER TABLE ${q(c.table)} ADD${name} UNIQUE (${c.columns.map(ident).join(', ')})`);
          break;
        }
        case 'add_check': {
          await relation(`${at}.table`, c.table);
          const name = c.name ? ` CONSTRAINT ${ident(newName(`${at}.name`, c.name))}` : '';
          // Parsed alone first (a bind parameter forces the extended protocol: one statement).
          try {
            await tx.query('SAVEPOINT basalt_check_parse');
            await tx.query(`SELECT 1 FROM ${q(c.table)} WHERE $1::boolean AND (\n${c.expression}\n)`, [false]);
            await tx.query('RELEASE SAVEPOINT basalt_check_parse');
          } catch (e) {
            if (!(e instanceof PgError)) throw e;
            if (e.code === '55P03') throw AdminErrors.conflict(LOCK_REFUSED);
            throw AdminErrors.field(`${at}.expression`, `PostgreSQL refused the expression: ${e.message}`);
          }
          const called = await unsafeCalls(tx, q(c.table), c.expression);
          if (called.length)
            throw AdminErrors.field(
              `${at}.expression`,
              `The expression calls ${called.join(', ')}: a check may not call functions that change the role or settings, run SQL given as text, or reach the server's files or other connections.`,
            );
          // Then made a check NOT VALID (rolled back), so PostgreSQL's own rules for a check
          // (no subquery, aggregate, window or set-returning function) refuse it before the
          // count below evaluates it on every row as the platform's role.
          await tx.query('SAVEPOINT basalt_check_parse');
          try {
            await tx.query(
              `ALTER TABLE ${q(c.table)} ADD CONSTRAINT ${ident(`basalt_check_${crypto.randomUUID().replace(/-/g, '')}`)} CHECK (\n${c.expression}\n) NOT VALID`,
            );
          } catch (e) {
            if (!(e instanceof PgError)) throw e;
            if (e.code === '55P03') throw AdminErrors.conflict(LOCK_REFUSED);
            throw AdminErrors.field(`${at}.expression`, `PostgreSQL refused the expression: ${e.message}`);
          } finally {
            await tx.query('ROLLBACK TO SAVEPOINT basalt_check_parse');
            await tx.query('RELEASE SAVEPOINT basalt_check_parse');
          }
          refuses(
            i,
            await count(`SELECT count(*) AS n FROM ${q(c.table)} WHERE $1::boolean AND NOT (\n${c.expression}\n)`, [
              true,
            ]),
            'failing the check',
          );
          mine.push(`ALTER TABLE ${q(c.table)} ADD${name} CHECK (\n${c.expression}\n)`);
          break;
        }
        case 'add_foreign_key': {
          const rel = await relation(`${at}.table`, c.table);
          await existingColumns(`${at}.columns`, rel, c.table, c.columns);
          const target = await relation(`${at}.references.table`, c.references.table);
          let to = c.references.columns;
          if (to) await existingColumns(`${at}.references.columns`, target, c.references.table, to);
          else {
            const { rows } = await tx.query<{ name: string }>(
              `SELECT a.attname AS name FROM pg_catalog.pg_index i
                 CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o)
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n
                WHERE i.indrelid = $1::int8::oid AND i.indisprimary ORDER BY k.o`,
              [target.oid],
            );
            if (!rows.length)
              throw AdminErrors.field(
                `${at}.references.columns`,
                `${c.references.table} has no primary key: name the columns`,
              );
            to = rows.map((r) => r.name);
          }
          if (to.length !== c.columns.length)
            throw AdminErrors.field(
              `${at}.references.columns`,
              `name as many columns as columns (${c.columns.length})`,
            );
          refuses(
            i,
            await count(
              `SELECT count(*) AS n FROM ${q(c.table)} s WHERE ${c.columns.map((x) => `s.${ident(x)} IS NOT NULL`).join(' AND ')}
                 AND NOT EXISTS (SELECT 1 FROM ${q(c.references.table)} r WHERE ${c.columns.map((x, j) => `r.${ident(to[j]!)} = s.${ident(x)}`).join(' AND ')})`,
            ),
            `a ${c.columns.join(', ')} with no matching row in ${c.references.table}`,
          );
          const name = c.name ? ` CONSTRAINT ${ident(newName(`${at}.name`, c.name))}` : '';
          const onDelete = c.on_delete && c.on_delete !== 'no action' ? ` ON DELETE ${ON_DELETE[c.on_delete]}` : '';
          mine.push(
            `ALTER TABLE ${q(c.table)} ADD${name} FOREIGN KEY (${c.columns.map(ident).join(', ')}) REFERENCES ${q(c.references.table)} (${to.map(ident).join(', ')})${onDelete}`,
          );
          break;
        }
        case 'drop_constraint': {
          const rel = await relation(`${at}.table`, c.table);
          const found = await count(
            'SELECT count(*) AS n FROM pg_catalog.pg_constraint WHERE conrelid = $1::int8::oid AND conname = $2',
            [rel.oid, c.name],
          );
          if (!found) throw AdminErrors.field(`${at}.name`, `no constraint '${c.name}' on '${c.table}'`);
          mine.push(`ALTER TABLE ${q(c.table)} DROP CONSTRAINT ${ident(c.name)}`);
          break;
        }
        case 'add_index': {
          const rel = await relation(`${at}.table`, c.table);
          await existingColumns(`${at}.columns`, rel, c.table, c.columns);
          if (c.unique)
            refuses(i, await duplicates(c.table, c.columns), `the same ${c.columns.join(', ')} as another row`);
          const name = c.name ? `${ident(newName(`${at}.name`, c.name))} ` : '';
          mine.push(
            `CREATE ${c.unique ? 'UNIQUE ' : ''}INDEX ${name}ON ${q(c.table)} (${c.columns.map(ident).join(', ')})`,
          );
          break;
        }
        case 'drop_index': {
          const rel = await relation(`${at}.table`, c.table);
          const found = await count(
            `SELECT count(*) AS n FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class x ON x.oid = i.indexrelid
              WHERE i.indrelid = $1::int8::oid AND x.relname = $2`,
            [rel.oid, c.name],
          );
          if (!found) throw AdminErrors.field(`${at}.name`, `no index '${c.name}' on '${c.table}'`);
          mine.push(`DROP INDEX ${q(c.name)}`);
          break;
        }
      }
    } catch (e) {
      // What PostgreSQL refused while the change was read (a lock not granted in time, a check
      // failing on a row while its refusals are counted): the change's field, never a 500.
      throw e instanceof PgError ? refusedChange(c.op === 'add_check' ? `${at}.expression` : at, e, warnings, i) : e;
    }
    await run(tx, mine, at, warnings, i);
    statements.push(...mine);
    if (c.op === 'create_table' && c.owned) {
      // Owned by the signed-in user: the Access view's own statements (data-access-changes.ts).
      const index = `CREATE INDEX ON ${q(c.table)} ("owner")`;
      await run(tx, [index], at, warnings, i);
      const own = 'owner = basalt.uid()';
      const access: AccessChange[] = [
        { op: 'rls', enabled: true },
        ...(['SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const).map(
          (privilege): AccessChange => ({ op: 'grant', role: 'basalt_user', privilege }),
        ),
        { op: 'create_policy', name: 'own', command: 'ALL', roles: ['basalt_user'], using: own, with_check: own },
      ];
      const names = new Set(['id', 'owner', ...c.columns.map((x) => x.name)]);
      const more = await accessStatements(tx, schema, { name: c.table, primaryKey: ['id'], columns: names }, access);
      await run(tx, more, at, warnings, i);
      statements.push(index, ...more);
    }
  }
  return { statements, warnings };
}

async function run(tx: Queryable, list: string[], at: string, warnings: SchemaWarning[], i: number): Promise<void> {
  for (const st of list)
    try {
      await tx.query(st);
    } catch (e) {
      throw e instanceof PgError ? refusedChange(at, e, warnings, i) : e;
    }
}
