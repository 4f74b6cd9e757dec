/**
 * CSV export of the admin data browser (docs/admin.md "Data browser").
 *
 * Streamed: rows are read in short batches as the stream is read, so memory stays
 * bounded by one batch whatever the table's size. Tables with a primary key are paged by
 * keyset (the sort asked for, then the key: rows after the last one sent), each batch its
 * own short statement, so no transaction stays open while a slow client reads (on the
 * embedded engine an open transaction would hold the whole database). A table without a
 * primary key has no stable keyset: on external PostgreSQL it is read through a cursor in
 * one read-only transaction (its own connection; a consistent snapshot), stopped if the
 * client stops reading; on the embedded engine by OFFSET batches, each a short statement
 * (rows changed during the export may then be missed or repeated).
 *
 * Cells are the Database API's values (docs/database.md "Value representation"): json
 * and arrays as JSON text, bytea as base64, bigint/numeric as written by Postgres; NULL
 * is an empty cell and an empty string is `""`, so an export imports back unchanged
 * (import.ts) — except that, by default, a text cell a spreadsheet would run as a
 * formula is neutralised (see `neutralise`); `formulas: 'keep'` writes it as stored.
 */
import { PgError, type Queryable } from '../../../db/engine';
import { AppError } from '../../../http/errors';
import { AdminErrors } from '../../admin/errors';
import type { Column, Table } from '../catalog';
import type { QueryBody } from '../model';
import { mapDbError } from '../pg-errors';
import { orderBy, Params, where } from '../query-builder';
import type { Filter, Sort } from '../model';
import type { BrowserCore, Row } from './core';
import { keyParts, keysetCondition, orderByColumns, withKeyOrder } from './sql';
import { decodeRows } from '../value-codec';

/** Rows per export batch: at most this many, fewer when rows are wide (see BATCH_TARGET_BYTES). */
export const EXPORT_BATCH_MAX = 1000;
const EXPORT_BATCH_MIN = 10;
/** CSV bytes aimed at per batch; the next batch's row count is adjusted to it. */
const BATCH_TARGET_BYTES = 1 << 20;

// ---------------------------------------------------------------- encoding

const NEEDS_QUOTES = /[",\r\n]/;

export function quote(s: string): string {
  if (s === '') return '""';
  return NEEDS_QUOTES.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

/** What a spreadsheet reads as a formula (OWASP "CSV injection"): a leading =, +, -, @, tab or CR. */
const FORMULA_START = /^[=+\-@\t\r]/;
/** A plain number is never a formula, and `'-5` would spoil it: numbers stay as they are. */
const PLAIN_NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/**
 * A cell text a spreadsheet would run as a formula gets a leading `'`, which spreadsheets
 * show as text (docs/admin.md "Data browser"). Numbers are left alone.
 */
export function neutralise(s: string): string {
  return FORMULA_START.test(s) && !PLAIN_NUMBER.test(s) ? `'${s}` : s;
}

/** How cells that look like formulas are written: `escape` (default) neutralises them, `keep` writes them as stored. */
export type FormulaMode = 'escape' | 'keep';

/** One value (API representation) → one CSV cell. */
export function csvCell(col: Column, v: unknown, formulas: FormulaMode = 'escape'): string {
  if (v === null || v === undefined) return '';
  const s = col.kind === 'json' || col.isArray ? JSON.stringify(v) : String(v);
  return quote(formulas === 'escape' ? neutralise(s) : s);
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

async function openSource(
  core: BrowserCore,
  name: string,
  q: { filters?: Filter[]; sort?: Sort[] },
): Promise<{ table: Table; source: Source }> {
  const { p } = core;
  // Checks the table, the filters and the sort like a select (unknown column → 400).
  const { table } = await core.build(
    name,
    (t) =>
      ({ entity: name, action: 'select', filters: q.filters, sort: withKeyOrder(t, q.sort), limit: 0 }) as QueryBody,
  );
  const sort = withKeyOrder(table, q.sort);
  orderBy(table, sort); // validated above; keeps the builder the judge of a sort item
  const parts = keyParts(table, sort);
  const filtersSql = (params: Params) => where(table, q.filters, params);
  const run = async (q2: Queryable, sql: string, params: unknown[]) =>
    decodeRows(table.columnList, (await q2.query<Row>(sql, params)).rows);

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
      await tx.rollback().catch(() => {}); // a read-only export: a failed rollback loses nothing, and its connection is dropped
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

export function exportCsv(
  core: BrowserCore,
  name: string,
  q: { filters?: Filter[]; sort?: Sort[] },
  formulas: FormulaMode = 'escape',
): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  let opened: { table: Table; source: Source } | undefined;
  // The first batch is short: its rows' width sets the next batch's size, so wide rows
  // (a megabyte each) are never read a thousand at a time.
  let size = EXPORT_BATCH_MIN;
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
          controller.error(AdminErrors.exportAbandoned());
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
              lines[i] = csvLine(cols.map((c) => csvCell(c, r[c.name], formulas)));
            }
            const body = lines.join('');
            // Aim the next batch at BATCH_TARGET_BYTES: wide rows → fewer per batch.
            size = Math.max(
              EXPORT_BATCH_MIN,
              Math.min(EXPORT_BATCH_MAX, Math.floor((size * BATCH_TARGET_BYTES) / Math.max(1, body.length))),
            );
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
              void finish().catch(() => {}); // the client has gone: nobody is left to tell
            }, core.p.settings.get('db.transaction_idle_timeout_ms'));
            (idle as { unref?: () => void }).unref?.();
          }
        } catch (e) {
          await finish().catch(() => {}); // the error being reported is the one that matters
          let err = e;
          if (!(e instanceof AppError) && e instanceof PgError && opened) {
            err = await mapDbError(e, {
              table: opened.table,
              snap: await core.catalog.get(),
              catalog: core.catalog,
              timeoutMs: core.p.settings.get('db.statement_timeout_ms'),
            });
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
