/**
 * CSV import of the admin data browser (docs/admin.md "Data browser").
 *
 * Parses RFC 4180 with csv-parse (quoted cells with commas, doubled quotes and line
 * breaks; CRLF, LF or CR). The header row names the columns (checked against the live
 * catalog); cells are read as export.ts writes them. Every row is inserted in the
 * caller's transaction, many per statement, each statement under a savepoint; when one
 * fails, its rows are retried one by one to name the line of the bad one.
 */
import { parse } from 'csv-parse/sync';
import { undeclared } from '../../../util/undeclared';
import { PgError, type Queryable, underSavepoint } from '../../../db/engine';
import { AppError, validationError } from '../../../http/errors';
import type { Column } from '../catalog';
import type { QueryBody } from '../model';
import { mapDbError } from '../pg-errors';
import type { Statement } from '../query-builder';
import { encodeValue, ValueError } from '../value-codec';
import type { BrowserCore } from './core';
import { invalid } from './sql';

type Cell = { v: string; q: boolean };
const OMIT = Symbol('omit');
const BOOLS: Record<string, boolean> = {
  true: true,
  t: true,
  yes: true,
  y: true,
  on: true,
  '1': true,
  false: false,
  f: false,
  no: false,
  n: false,
  off: false,
  '0': false,
};
/** Rows per INSERT statement (fewer for wide tables: Postgres takes at most 65,535 parameters). */
const IMPORT_CHUNK = 500;

/**
 * The error naming the CSV line (and column) at fault: a `validation_error` with
 * `details.fields.csv` and the line, or the error the database gave for that line
 * (e.g. 409 `conflict`) with the same facts added.
 */
function lineError(line: number, column: string | undefined, problem: string, from?: AppError): AppError {
  const where = column === undefined ? `Line ${line}` : `Line ${line}, column '${column}'`;
  const message = `${where}: ${problem}`;
  const facts = { ...(from?.extra.details ?? {}), line, ...(column === undefined ? {} : { column }) };
  const cause = from?.extra.cause ?? from;
  if (!from || from.code === 'validation_error')
    return validationError(message, { csv: message }, { status: from?.status, details: facts, cause });
  return new AppError(from.status, from.code, message, { details: { ...facts, fields: { csv: message } }, cause });
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

export async function importCsv(
  core: BrowserCore,
  tx: Queryable,
  name: string,
  csv: string,
): Promise<{ inserted: number }> {
  if (typeof csv !== 'string') throw invalid('csv', 'must be CSV text');
  // All or nothing needs a transaction: given the database itself, open one.
  if (tx === core.p.db) return core.p.db.transaction((t) => importCsv(core, t, name, csv));
  const via = core.via(tx);
  let { table, snap } = await core.resolve(name, via);

  let records: { record: Cell[]; info: { lines: number; empty_lines: number } }[];
  try {
    // With `info: true` each record comes as { record, info }, which csv-parse's overloads do not type.
    records = undeclared<typeof records>(
      parse(csv, {
        bom: true,
        info: true,
        skip_empty_lines: true,
        record_delimiter: ['\r\n', '\n', '\r'],
        cast: (v: string, ctx: { quoting: boolean }) => ({ v, q: ctx.quoting }),
      }),
    );
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
    if (fresh && t2) {
      table = t2;
      snap = fresh;
    }
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
  const timeoutMs = core.p.settings.get('db.statement_timeout_ms');
  const embedded = core.p.db.kind === 'embedded';

  /** Insert rows under a savepoint; on a database error roll back to it and return the error. */
  const attempt = async (part: typeof rows): Promise<{ error?: unknown; st?: Statement }> => {
    const allEmpty = part.every((r) => Object.keys(r.data).length === 0);
    if (allEmpty && part.length > 1) {
      for (const r of part) {
        const res = await attempt([r]);
        if (res.error) return res;
      }
      return {};
    }
    const { st } = await core.build(
      name,
      () =>
        ({
          entity: name,
          action: 'insert',
          fields,
          data: part.length === 1 ? part[0]!.data : part.map((r) => r.data),
        }) as QueryBody,
      via,
    );
    try {
      await underSavepoint(tx, () => tx.query(st.sql, st.params));
      return {};
    } catch (error) {
      if (!(error instanceof PgError)) throw error;
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
      const mapped = await mapDbError(one.error, {
        statement: one.st,
        table,
        snap,
        catalog: core.catalog,
        probe: embedded ? tx : core.p.db,
        timeoutMs,
      });
      if (mapped instanceof AppError) {
        const column =
          typeof mapped.extra.details?.column === 'string' ? (mapped.extra.details.column as string) : undefined;
        throw lineError(
          r.line,
          column,
          column ? mapped.message.replace(/^Column '[^']*': /, '') : mapped.message,
          mapped,
        );
      }
      throw mapped;
    }
    throw lineError(
      part[0]!.line,
      undefined,
      'these rows could not be inserted together; import them in smaller files',
    );
  }
  return { inserted };
}
