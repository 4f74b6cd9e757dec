/**
 * Changing a table's access rules from the panel (docs/admin-api.md, Data browser →
 * Access): grants to `basalt_user` / `basalt_anon` (table or columns), row-level security
 * on or off, policies created or dropped, and whether the table emits realtime changes.
 *
 * The statements run in one transaction with the audit row, and the same statements are
 * written as a new file in `migrations.dir`, recorded in `basalt.schema_migrations` as
 * applied in that transaction, so the operator's migrations stay the one source of truth:
 * commit the file with the others. The file is written before the commit and removed if
 * the transaction fails; if the process stops between the two, the file runs at the next
 * start, which is what was asked.
 *
 * Names are checked against the catalog (table, columns) or lists (roles, privileges,
 * commands) and quoted; a policy name is quoted. A policy's USING / WITH CHECK are SQL
 * expressions an administrator writes, as in a migration; each is first parsed on its own
 * line inside a statement with a bind parameter (the extended protocol, which refuses a
 * second statement), so one cannot close the policy and smuggle another statement in. That
 * parse also says which expression PostgreSQL refuses: the answer names the policy and the
 * clause (`details.fields["changes[i].using"]` or `["changes[i].with_check"]`). An
 * expression that calls a function able to change the role or settings, run SQL given as
 * text or reach the server's files is refused the same way (`unsafeCalls`, docs/database.md
 * "No way back to the platform's role").
 */
import {
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import type { Static } from 'elysia';
import { join, resolve } from 'node:path';
import { PgError, type Queryable } from '../../db/engine';
import type { Basalt } from '../../services';
import type { Table } from '../database/catalog';
import { MIGRATION_LOCK } from '../../db/migrate';
import { AdminErrors } from './errors';
import type { Bodies } from './model';

/** One change of a table's access, as the route's body declares it (`Bodies.access`). */
export type AccessChange = Static<typeof Bodies.access>['changes'][number];

export const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;
/** A string literal; an `E''` one (backslashes doubled too) when it holds a backslash, so it reads the same whatever standard_conforming_strings says. */
export const literal = (text: string) =>
  text.includes('\\') ? `E'${text.replace(/\\/g, '\\\\').replace(/'/g, "''")}'` : `'${text.replace(/'/g, "''")}'`;

/** What the access statements read of a table: a catalog `Table`, or one created in the same transaction. */
export type AccessTable = Pick<Table, 'name' | 'primaryKey'> & { columns: { has(name: string): boolean } };

/** The SQL statements of `changes` on `table` (schema-qualified names, nothing from the request unquoted). */
export async function accessStatements(
  q: Queryable,
  schema: string,
  table: AccessTable,
  changes: AccessChange[],
): Promise<string[]> {
  const qualified = `${ident(schema)}.${ident(table.name)}`;
  const out: string[] = [];
  const expressions: { at: string; clause: 'USING' | 'WITH CHECK'; policy: string; sql: string }[] = [];
  changes.forEach((c, i) => {
    const at = `changes[${i}]`;
    switch (c.op) {
      case 'rls':
        out.push(`ALTER TABLE ${qualified} ${c.enabled ? 'ENABLE' : 'DISABLE'} ROW LEVEL SECURITY`);
        break;
      case 'realtime':
        if (c.enabled && !table.primaryKey.length)
          throw AdminErrors.field(at, 'a table without a primary key cannot emit changes');
        out.push(`SELECT basalt.realtime_${c.enabled ? 'enable' : 'disable'}(${literal(`${schema}.${table.name}`)})`);
        break;
      case 'grant':
      case 'revoke': {
        let cols = '';
        if (c.columns?.length) {
          if (c.privilege === 'DELETE') throw AdminErrors.field(at, 'DELETE is granted on the whole table');
          for (const col of c.columns)
            if (!table.columns.has(col)) throw AdminErrors.field(at, `unknown column '${col}' of '${table.name}'`);
          cols = ` (${c.columns.map(ident).join(', ')})`;
        }
        out.push(
          c.op === 'grant'
            ? `GRANT ${c.privilege}${cols} ON ${qualified} TO ${c.role}`
            : `REVOKE ${c.privilege}${cols} ON ${qualified} FROM ${c.role}`,
        );
        break;
      }
      case 'create_policy': {
        if (!c.roles.length) throw AdminErrors.field(at, 'name at least one role');
        if (c.command === 'INSERT' && c.using) throw AdminErrors.field(at, 'an INSERT policy has WITH CHECK only');
        if ((c.command === 'SELECT' || c.command === 'DELETE') && c.with_check)
          throw AdminErrors.field(at, `a ${c.command} policy has USING only`);
        if (!c.using && !c.with_check) throw AdminErrors.field(at, 'give USING or WITH CHECK');
        let st = `CREATE POLICY ${ident(c.name)} ON ${qualified} AS ${c.permissive === false ? 'RESTRICTIVE' : 'PERMISSIVE'} FOR ${c.command} TO ${[...new Set(c.roles)].join(', ')}`;
        // Each expression on lines of its own: a `--` comment in it ends with its line.
        if (c.using) st += ` USING (\n${c.using}\n)`;
        if (c.with_check) st += ` WITH CHECK (\n${c.with_check}\n)`;
        if (c.using) expressions.push({ at: `${at}.using`, clause: 'USING', policy: c.name, sql: c.using });
        if (c.with_check)
          expressions.push({ at: `${at}.with_check`, clause: 'WITH CHECK', policy: c.name, sql: c.with_check });
        out.push(st);
        break;
      }
      case 'drop_policy':
        out.push(`DROP POLICY ${ident(c.name)} ON ${qualified}`);
        break;
    }
  });
  // One statement each, proven by the extended protocol (a bind parameter forces it).
  for (const e of expressions)
    try {
      await q.query(`SELECT 1 FROM ${qualified} WHERE $1::boolean AND (\n${e.sql}\n)`, [false]);
    } catch (err) {
      if (!(err instanceof PgError)) throw err;
      throw AdminErrors.field(
        e.at,
        `PostgreSQL refused the ${e.clause} expression of policy ${e.policy}: ${err.message}`,
      );
    }
  for (const e of expressions) {
    const called = await unsafeCalls(q, qualified, e.sql);
    if (called.length)
      throw AdminErrors.field(
        e.at,
        `The ${e.clause} expression of policy ${e.policy} calls ${called.join(', ')}: a policy may not call functions that change the role or settings a statement runs with, run SQL given as text, or reach the server's files or other connections. Write the condition with columns, basalt.uid(), basalt.role() and basalt.jwt().`,
      );
  }
  // An INSERT grant: the sequences behind the table's serial columns too (nextval needs USAGE).
  for (const c of changes)
    if (c.op === 'grant' && c.privilege === 'INSERT') {
      const { rows } = await q.query<{ seq: string | null }>(
        `SELECT pg_catalog.pg_get_serial_sequence($1, a.attname) AS seq
           FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped`,
        [qualified],
      );
      for (const r of rows) if (r.seq) out.push(`GRANT USAGE ON SEQUENCE ${r.seq} TO ${c.role}`);
    }
  return out;
}

/**
 * The next file name in `dir`: numbered after the highest leading number there (same
 * width), so it sorts after every file present: `003_panel_notes_access.sql`.
 */
export function nextMigrationName(dir: string, table: string, what: string): string {
  const names = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.sql')) : [];
  let max = 0;
  let width = 3;
  for (const n of names) {
    const m = /^(\d+)/.exec(n);
    if (!m) continue;
    const v = Number(m[1]);
    if (v >= max) {
      max = v;
      width = Math.max(width, m[1]!.length);
    }
  }
  const slug = table
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .slice(0, 40);
  return `${String(max + 1).padStart(width, '0')}_panel_${slug}_${what}.sql`;
}

function checksum(text: string): string {
  return new Bun.CryptoHasher('sha256').update(text).digest('hex');
}

export interface AppliedChange {
  /** The file written (absolute path). */
  file: string;
  statements: string[];
}

/**
 * How long a change from the panel waits for a lock on a table before it gives up (409
 * `conflict`): a change queued behind a long transaction would otherwise block every
 * statement queued behind it on that table.
 */
export const PANEL_LOCK_TIMEOUT = '5s';

/** The answer (409 `conflict`) when a lock was not granted within PANEL_LOCK_TIMEOUT. */
export const LOCK_REFUSED =
  'The table is in use by another transaction and its lock was not granted in time; nothing was changed. Try again.';

/** Bound the lock waits of the transaction `tx` (PANEL_LOCK_TIMEOUT). */
export async function boundLocks(tx: Queryable): Promise<void> {
  await tx.query(`SET LOCAL lock_timeout = '${PANEL_LOCK_TIMEOUT}'`);
}

/**
 * Run `statements` in `tx` (the audited transaction), write them as a migration file and
 * record it applied. `what` names the file (`access`, `realtime`).
 */
export async function applyAsMigration(
  p: Basalt,
  tx: Queryable,
  table: string,
  what: string,
  statements: string[],
): Promise<AppliedChange> {
  await boundLocks(tx);
  for (const st of statements) await tx.query(st);
  return recordMigration(p, tx, table, what, statements);
}

/**
 * Write `statements`, already run in `tx`, as the next file of `migrations.dir` and record
 * it in `basalt.schema_migrations` as applied in `tx`. The migrations' advisory lock is
 * taken first, so two instances never pick the same number.
 */
export async function recordMigration(
  p: Basalt,
  tx: Queryable,
  table: string,
  what: string,
  statements: string[],
): Promise<AppliedChange> {
  const dir = resolve(p.settings.get('migrations.dir'));
  try {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
  } catch (e) {
    // Another apply or a start migrating held it past the lock timeout (boundLocks).
    if (e instanceof PgError && e.code === '55P03') throw AdminErrors.conflict(LOCK_REFUSED);
    throw e;
  }
  const name = nextMigrationName(dir, table, what);
  const text = `-- Written by the admin panel (${what} of ${table}), ${new Date().toISOString()}; applied then.\n${statements.map((s) => `${s};`).join('\n')}\n`;
  await tx.query('INSERT INTO basalt.schema_migrations (name, checksum) VALUES ($1, $2)', [name, checksum(text)]);
  const file = join(dir, name);
  // Written whole (and synced) under a name the migrator skips, then linked to its own name,
  // which fails if present: a start in between never finds half a file. Mode 0600, as the
  // platform's other files.
  const part = join(dir, `.${name}.${process.pid}.part`);
  try {
    mkdirSync(dir, { recursive: true });
    const fd = openSync(part, 'wx', 0o600);
    try {
      writeFileSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    linkSync(part, file);
  } catch (e) {
    throw AdminErrors.conflict(
      `The change was not made: its migration file could not be written in migrations.dir (${dir}): ${(e as NodeJS.ErrnoException).code ?? 'error'}.`,
    );
  } finally {
    forget(part);
  }
  return { file, statements };
}

/** Remove a file written for a transaction that then failed. */
export function forget(file: string | undefined): void {
  if (file)
    try {
      unlinkSync(file);
    } catch {
      // already gone
    }
}

/**
 * Functions no policy made here may call: what changes the role or identity a statement runs
 * as (`set_config`), runs SQL given as text (`query_to_xml` and its kin, `ts_stat`,
 * `ts_rewrite`, `dblink*`), or reaches the server's files (large objects too), settings, WAL,
 * replication or other sessions. A check (data-schema-changes.ts) runs as the platform's role
 * when it is added, over every row, so the list holds the superuser's server functions too. The
 * roles user statements run as cannot become the platform's anyway (docs/database.md, "Who is
 * which role"); this says so at once, naming the call, instead of at the first request.
 */
const UNSAFE_FUNCTION =
  /^(set_config|query_to_xml.*|query_to_xmlschema|cursor_to_xml.*|table_to_xml.*|schema_to_xml.*|database_to_xml.*|ts_stat|ts_rewrite|dblink.*|pg_read_file|pg_read_binary_file|pg_ls_.*|pg_stat_file|pg_file_.*|lo_.*|loread|lowrite|pg_promote|pg_switch_wal|pg_create_restore_point|pg_backup_.*|pg_start_backup|pg_stop_backup|pg_.*replication.*|pg_.*_slot|pg_logical_.*|pg_wal_replay_.*|pg_stat_reset.*|pg_log_backend_memory_contexts|pg_terminate_backend|pg_cancel_backend|pg_reload_conf|pg_rotate_logfile|pg_signal_backend|pg_advisory.*|pg_notify)$/;

/**
 * The unsafe functions `expression` calls (UNSAFE_FUNCTION), as PostgreSQL resolved them:
 * the expression is made a policy under a savepoint that is always rolled back, and the
 * functions of its stored tree (every call, operator, aggregate and subquery in it) are
 * looked up by oid, so no spelling, quoting, schema or cast hides one.
 */
export async function unsafeCalls(q: Queryable, qualified: string, expression: string): Promise<string[]> {
  const name = `basalt_check_${crypto.randomUUID().replace(/-/g, '')}`;
  await q.query('SAVEPOINT basalt_policy_check');
  try {
    await q.query(`CREATE POLICY ${ident(name)} ON ${qualified} USING (\n${expression}\n)`);
    const { rows } = await q.query<{ tree: string }>(
      'SELECT polqual::text AS tree FROM pg_catalog.pg_policy WHERE polrelid = $1::regclass AND polname = $2',
      [qualified, name],
    );
    const oids = [...(rows[0]?.tree ?? '').matchAll(/:(?:funcid|opfuncid|aggfnoid|winfnoid) (\d+)/g)].map((m) => m[1]);
    if (!oids.length) return [];
    // Also the platform's own functions the site's roles may not call (basalt.platform_event, …):
    // a check runs them as the platform's role, over every row, when it is added.
    const fns = await q.query<{ proname: string; platform: boolean }>(
      `SELECT DISTINCT p.proname, n.nspname = 'basalt' AND NOT pg_catalog.has_function_privilege('basalt_user', p.oid, 'EXECUTE') AS platform
         FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
        WHERE p.oid = ANY($1::oid[]) ORDER BY 1`,
      [`{${[...new Set(oids)].join(',')}}`],
    );
    return fns.rows.filter((f) => f.platform || UNSAFE_FUNCTION.test(f.proname)).map((f) => f.proname);
  } finally {
    await q.query('ROLLBACK TO SAVEPOINT basalt_policy_check');
    await q.query('RELEASE SAVEPOINT basalt_policy_check');
  }
}
