/**
 * CSV export and import of the admin data browser (docs/admin.md "Data browser").
 *
 * Export is streamed: rows are read in short batches as the stream is read, so memory
 * stays bounded by one batch whatever the table's size. Tables with a primary key are
 * paged by keyset (the sort asked for, then the key: `WHERE (sort…, key…) > (last row)`),
 * each batch its own short statement, so no transaction stays open while a slow client
 * reads (on the embedded engine an open transaction would hold the whole database). A
 * table without a primary key has no stable keyset: on external PostgreSQL it is read
 * through a cursor in one read-only transaction (its own connection; a consistent
 * snapshot); on the embedded engine by OFFSET batches, each a short statement (rows
 * changed during the export may then be missed or repeated).
 *
 * Cells are the Database API's values (docs/database.md "Value representation"): json
 * and arrays as JSON text, bytea as base64, bigint/numeric as written by Postgres; NULL
 * is an empty cell and an empty string is `""`, so an export imports back unchanged.
 *
 * Import parses RFC 4180 with csv-parse (quotes, doubled quotes, newlines inside quotes,
 * CRLF/LF/CR). The header row names the columns (checked against the live catalog);
 * every row is inserted in the caller's transaction, many per statement, under a
 * savepoint; when a statement fails, its rows are retried one by one to name the line.
 */
import { parse } from 'csv-parse/sync';
import { PgError, type Queryable } from '../../db/engine';
import { AppError } from '../../http/errors';
import type { Column, Table } from '../database/catalog';
import type { QueryBody } from '../database/model';
import { mapDbError } from '../database/pg-errors';
import { orderBy, Params, where } from '../database/query-builder';
import { castParam, encodeValue, ValueError } from '../database/value-codec';
import { decodeRows, invalid, keyParts, orderByColumns, withKeyOrder, type BrowserCore, type Filter, type KeyPart, type Row, type Sort } from './data-browser';

/** Rows per export batch: at most this many, fewer when rows are wide (see BATCH_TARGET_BYTES). */
export const EXPORT_BATCH_MAX = 1000;
const EXPORT_BATCH_MIN = 10;
/** CSV bytes aimed at per batch; the next batch's row count is adjusted to it. */
const BATCH_TARGET_BYTES = 1 << 20;

// ---------------------------------------------------------------- encoding

const NEEDS_QUOTES = /[",\r\n]/;

function quote(s: string): string {
  if (s === '') return '""';
  return NEEDS_QUOTES.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

/** One value (API representation) → one CSV cell. */
export function csvCell(col: Column, v: unknown): string {
  if (v === null || v === undefined) return '';
  return quote(col.kind === 'json' || col.isArray ? JSON.stringify(v) : String(v));
}

export function csvLine(cells: string[]): string {
  return cells.join(',') + '\r\n';
}

// ---------------------------------------------------------------- export

interface Source {
  /** The next batch, or null at the end. */
  next(size: number): Promise<Row[] | null>;
  close(): Promise<void>;
  /** Holds a connection and its transaction between batches (the cursor). */
  holds?: boolean;
}

/**
 * Rows after `last` in the order of `parts` (ASC puts NULLs last, DESC first, as
 * Postgres does by default). With every key column NOT NULL and one direction, a row
 * comparison the index can serve: `(a, b) > ($1, $2)`.
 */
function keysetCondition(table: Table, parts: KeyPart[], last: Row, params: Params): string {
  const ref = (k: KeyPart) => `${table.quoted}.${k.col.quoted}`;
  const bind = (k: KeyPart): string | null => {
    const v = last[k.col.name];
    if (v === null || v === undefined) return null;
    try {
      return castParam(params.add(encodeValue(k.col, v), k.col), k.col);
    } catch (e) {
      if (e instanceof ValueError) throw new Error(`export: cannot page on column '${k.col.name}': ${e.message}`);
      throw e;
    }
  };
  const simple = parts.every((k) => k.col.notNull) && parts.every((k) => k.desc === parts[0]!.desc);
  if (simple) {
    const values = parts.map(bind);
    const op = parts[0]!.desc ? '<' : '>';
    return parts.length === 1 ? `${ref(parts[0]!)} ${op} ${values[0]}` : `(${parts.map(ref).join(', ')}) ${op} (${values.join(', ')})`;
  }
  // after(i) = strictly-after on key i, or equal on key i and after(i + 1).
  let cond = 'FALSE';
  for (let i = parts.length - 1; i >= 0; i--) {
    const k = parts[i]!;
    const c = ref(k);
    const v = bind(k);
    let after: string;
    let equal: string;
    if (v === null) {
      after = k.desc ? `${c} IS NOT NULL` : 'FALSE';
      equal = `${c} IS NULL`;
    } else {
      after = k.desc ? `${c} < ${v}` : `(${c} > ${v} OR ${c} IS NULL)`;
      equal = `${c} = ${v}`;
    }
    cond = cond === 'FALSE' ? after : `${after === 'FALSE' ? '' : `${after} OR `}(${equal} AND (${cond}))`;
  }
  return cond;
}

async function openSource(core: BrowserCore, name: string, q: { filters?: Filter[]; sort?: Sort[] }): Promise<{ table: Table; source: Source }> {
  const { p } = core;
  // Checks the table, the filters and the sort like a select (unknown column → 400).
  const { table } = await core.build(name, (t) => ({ entity: name, action: 'select', filters: q.filters, sort: withKeyOrder(t, q.sort), limit: 0 } as QueryBody));
  const sort = withKeyOrder(table, q.sort);
  orderBy(table, sort); // validated above; keeps the builder the judge of a sort item
  const parts = keyParts(table, sort);
  const filtersSql = (params: Params) => where(table, q.filters, params);
  const run = async (q2: Queryable, sql: string, params: unknown[]) => decodeRows(table.columnList, (await q2.query<Row>(sql, params)).rows);

  if (table.primaryKey.length > 0) {
    let last: Row | undefined;
    return {
      table,
      source: {
        async next(size) {
          const params = new Params();
          let w = filtersSql(params);
          if (last) {
            const ks = keysetCondition(table, parts, last, params);
            w = w ? `${w} AND (${ks})` : ` WHERE ${ks}`;
          }
          const sql = `SELECT ${table.selectAll} FROM ${table.quoted}${w}${orderByColumns(table, parts)} LIMIT $${params.add(size)}`;
          const rows = await run(p.db, sql, params.list);
          if (rows.length === 0) return null;
          last = rows[rows.length - 1];
          return rows;
        },
        close: async () => {},
      },
    };
  }

  const params = new Params();
  const base = `SELECT ${table.selectAll} FROM ${table.quoted}${filtersSql(params)}${orderByColumns(table, parts)}`;
  if (p.db.kind === 'external') {
    const tx = await p.db.begin({ setup: ['SET TRANSACTION READ ONLY'] });
    let done = false;
    const close = async () => {
      if (done) return;
      done = true;
      await tx.rollback().catch(() => {});
    };
    try {
      await tx.query(`DECLARE basalt_admin_export NO SCROLL CURSOR FOR ${base}`, params.list);
    } catch (e) {
      await close();
      throw e;
    }
    return {
      table,
      source: {
        async next(size) {
          const rows = await run(tx, `FETCH ${Math.trunc(size)} FROM basalt_admin_export`, []);
          return rows.length ? rows : null;
        },
        close,
        holds: true,
      },
    };
  }
  let offset = 0;
  return {
    table,
    source: {
      async next(size) {
        const n = params.list.length;
        const rows = await run(p.db, `${base} LIMIT $${n + 1} OFFSET $${n + 2}`, [...params.list, size, offset]);
        offset += rows.length;
        return rows.length ? rows : null;
      },
      close: async () => {},
    },
  };
}

export function exportCsv(core: BrowserCore, name: string, q: { filters?: Filter[]; sort?: Sort[] }): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  let opened: { table: Table; source: Source } | undefined;
  let size = EXPORT_BATCH_MAX;
  let finished = false;
  let idle: ReturnType<typeof setTimeout> | undefined;
  let abandoned = false;
  const finish = async () => {
    if (idle) clearTimeout(idle);
    if (finished) return;
    finished = true;
    await opened?.source.close();
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (idle) clearTimeout(idle);
        if (abandoned) {
          controller.error(new AppError(408, 'export_abandoned', 'The export was not read for too long and was stopped; start it again.'));
          return;
        }
        try {
          let text = '';
          if (!opened) {
            opened = await openSource(core, name, q);
            text = csvLine(opened.table.columnList.map((c) => quote(c.name)));
          }
          const { table, source } = opened;
          const rows = await source.next(size);
          if (rows) {
            const cols = table.columnList;
            const lines: string[] = new Array(rows.length);
            for (let i = 0; i < rows.length; i++) {
              const r = rows[i]!;
              lines[i] = csvLine(cols.map((c) => csvCell(c, r[c.name])));
            }
            const body = lines.join('');
            // Aim the next batch at BATCH_TARGET_BYTES: wide rows → fewer per batch.
            size = Math.max(EXPORT_BATCH_MIN, Math.min(EXPORT_BATCH_MAX, Math.floor((size * BATCH_TARGET_BYTES) / Math.max(1, body.length))));
            text += body;
          }
          if (text) controller.enqueue(enc.encode(text));
          if (!rows) {
            await finish();
            controller.close();
          } else if (source.holds) {
            // A consumer that stops reading without cancelling (a stalled client) must not
            // hold a connection and its transaction (the cursor of a table without a key).
            idle = setTimeout(() => {
              abandoned = true;
              void finish().catch(() => {});
            }, core.p.settings.get<number>('db.transaction_idle_timeout_ms'));
            (idle as { unref?: () => void }).unref?.();
          }
        } catch (e) {
          await finish().catch(() => {});
          let err = e;
          if (!(e instanceof AppError) && e instanceof PgError && opened) {
            err = await mapDbError(e, { table: opened.table, snap: await core.catalog.get(), catalog: core.catalog, timeoutMs: core.p.settings.get<number>('db.statement_timeout_ms') });
          }
          controller.error(err);
        }
      },
      cancel: () => finish(),
    },
    // Nothing is read before the consumer asks: one batch in memory at a time.
    { highWaterMark: 0 },
  );
}

// ---------------------------------------------------------------- import

type Cell = { v: string; q: boolean };
const OMIT = Symbol('omit');
const BOOLS: Record<string, boolean> = { true: true, t: true, yes: true, y: true, on: true, '1': true, false: false, f: false, no: false, n: false, off: false, '0': false };
/** Rows per INSERT statement (fewer for wide tables: Postgres takes at most 65,535 parameters). */
const IMPORT_CHUNK = 500;

function lineError(line: number, column: string | undefined, problem: string, from?: AppError): AppError {
  const where = column === undefined ? `Line ${line}` : `Line ${line}, column '${column}'`;
  const message = `${where}: ${problem}`;
  return new AppError(from?.status ?? 400, from?.code ?? 'validation_error', message, {
    details: { ...(from?.extra.details ?? {}), line, ...(column === undefined ? {} : { column }), fields: { csv: message } },
    cause: from?.extra.cause ?? from,
  });
}

const CSV_PROBLEMS: Record<string, string> = {
  CSV_RECORD_INCONSISTENT_FIELDS_LENGTH: 'has a different number of cells than the header row',
  CSV_QUOTE_NOT_CLOSED: 'a quoted cell is never closed',
  CSV_INVALID_CLOSING_QUOTE: 'a quote inside a cell must be doubled ("") and the cell quoted',
  CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE: 'text after a closing quote; quote the whole cell',
};

/** A cell → the value to insert (Database API representation), or OMIT to let the column's default apply. */
function cellValue(col: Column, cell: Cell): unknown {
  const textLike = col.kind === 'text' && !col.isArray;
  // `""` is an empty value where one exists (text, bytea); an unquoted empty cell is NULL.
  if (cell.v === '' && !(cell.q && (textLike || (col.kind === 'bytea' && !col.isArray)))) {
    if (!col.notNull) return null;
    if (col.hasDefault) return OMIT;
    if (textLike) return '';
    throw new ValueError('is empty, but the column is NOT NULL and has no default');
  }
  if (col.isArray || col.kind === 'json') {
    try {
      return JSON.parse(cell.v);
    } catch {
      throw new ValueError(col.isArray ? 'expects a JSON array (e.g. ["a","b"] or [1,2])' : 'expects JSON text');
    }
  }
  if (col.kind === 'bool') {
    const b = BOOLS[cell.v.trim().toLowerCase()];
    if (b === undefined) throw new ValueError('expects true or false');
    return b;
  }
  return cell.v;
}

export async function importCsv(core: BrowserCore, tx: Queryable, name: string, csv: string): Promise<{ inserted: number }> {
  if (typeof csv !== 'string') throw invalid('csv', 'must be CSV text');
  // All or nothing needs a transaction: given the database itself, open one.
  if (tx === core.p.db) return core.p.db.transaction((t) => importCsv(core, t, name, csv));
  const via = core.via(tx);
  let { table, snap } = await core.resolve(name, via);

  let records: { record: Cell[]; info: { lines: number; empty_lines: number } }[];
  try {
    records = parse(csv, {
      bom: true,
      info: true,
      skip_empty_lines: true,
      record_delimiter: ['\r\n', '\n', '\r'],
      cast: (v: string, ctx: { quoting: boolean }) => ({ v, q: ctx.quoting }) as unknown as string,
    }) as unknown as typeof records;
  } catch (e) {
    const err = e as { code?: string; lines?: number };
    throw lineError(err.lines ?? 0, undefined, CSV_PROBLEMS[err.code ?? ''] ?? 'is not valid CSV (RFC 4180)');
  }
  if (records.length === 0) throw invalid('csv', 'is empty; the first line names the columns');

  // Line where each record starts (a quoted cell may span lines; empty lines are skipped).
  const starts: number[] = [];
  let prevEnd = 0;
  let prevEmpty = 0;
  for (const r of records) {
    starts.push(prevEnd + 1 + (r.info.empty_lines - prevEmpty));
    prevEnd = r.info.lines;
    prevEmpty = r.info.empty_lines;
  }

  const header = records[0]!.record.map((c) => c.v);
  if (header.some((h) => !table.columns.has(h))) {
    const fresh = await core.catalog.refreshOnMiss(via);
    const t2 = fresh?.tables.get(name);
    if (fresh && t2) (table = t2), (snap = fresh);
  }
  const seen = new Set<string>();
  const cols = header.map((h) => {
    const col = table.columns.get(h);
    if (!col) throw lineError(starts[0]!, h, `unknown column of table '${name}' (the header row names the columns)`);
    if (seen.has(h)) throw lineError(starts[0]!, h, 'named twice in the header row');
    seen.add(h);
    return col;
  });

  const rows: { line: number; data: Record<string, unknown> }[] = [];
  for (let i = 1; i < records.length; i++) {
    const line = starts[i]!;
    const data: Record<string, unknown> = {};
    records[i]!.record.forEach((cell, j) => {
      const col = cols[j]!;
      try {
        const v = cellValue(col, cell);
        if (v === OMIT) return;
        encodeValue(col, v); // the codec's checks, named by line and column
        data[col.name] = v;
      } catch (e) {
        if (e instanceof ValueError) throw lineError(line, col.name, e.message);
        throw e;
      }
    });
    rows.push({ line, data });
  }
  if (rows.length === 0) return { inserted: 0 };

  const fields = [table.primaryKey[0] ?? table.columnList[0]!.name];
  const chunk = Math.max(1, Math.min(IMPORT_CHUNK, Math.floor(60_000 / Math.max(1, cols.length))));
  const timeoutMs = core.p.settings.get<number>('db.statement_timeout_ms');
  const embedded = core.p.db.kind === 'embedded';

  /** Insert rows under a savepoint; on a database error roll back to it and return the error. */
  const attempt = async (part: typeof rows): Promise<{ error?: unknown; st?: import('../database/query-builder').Statement }> => {
    const allEmpty = part.every((r) => Object.keys(r.data).length === 0);
    if (allEmpty && part.length > 1) {
      for (const r of part) {
        const res = await attempt([r]);
        if (res.error) return res;
      }
      return {};
    }
    const { st } = await core.build(name, () => ({ entity: name, action: 'insert', fields, data: part.length === 1 ? part[0]!.data : part.map((r) => r.data) } as QueryBody), via);
    await tx.query('SAVEPOINT basalt_admin_import');
    try {
      await tx.query(st.sql, st.params);
      await tx.query('RELEASE SAVEPOINT basalt_admin_import');
      return {};
    } catch (error) {
      if (!(error instanceof PgError)) throw error;
      await tx.query('ROLLBACK TO SAVEPOINT basalt_admin_import');
      return { error, st };
    }
  };

  let inserted = 0;
  for (let i = 0; i < rows.length; i += chunk) {
    const part = rows.slice(i, i + chunk);
    const res = await attempt(part);
    if (!res.error) {
      inserted += part.length;
      continue;
    }
    // Find the row: one by one, each under the savepoint.
    for (const r of part) {
      const one = await attempt([r]);
      if (!one.error) continue;
      const mapped = await mapDbError(one.error, { statement: one.st, table, snap, catalog: core.catalog, probe: embedded ? tx : core.p.db, timeoutMs });
      if (mapped instanceof AppError) {
        const column = typeof mapped.extra.details?.column === 'string' ? (mapped.extra.details.column as string) : undefined;
        throw lineError(r.line, column, column ? mapped.message.replace(/^Column '[^']*': /, '') : mapped.message, mapped);
      }
      throw mapped;
    }
    throw lineError(part[0]!.line, undefined, 'these rows could not be inserted together; import them in smaller files');
  }
  return { inserted };
}
