/**
 * The wire writer's counts of bind parameters (src/db/wire-writer.ts): 16 bits, unsigned, as
 * PostgreSQL reads them; past 65,535 it refuses before writing anything, and a batch refused so
 * keeps what its session had queued (statements to close). Both engines' wire paths, on the
 * source (the HTTP side: ./bind-limit.test.ts); and the one map of an ErrorResponse's fields
 * (src/db/wire/errors.ts), whose names the engines read.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_BIND_PARAMS, TooManyBindParamsError, Writer } from '../../src/db/wire-writer';
import { PostgresError, readErrorResponse } from '../../src/db/wire/errors';
import { type Db, PgError } from '../../src/db/engine';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';

describe('the writer', () => {
  test('a count up to 65,535 is written unsigned', () => {
    const w = new Writer();
    w.count16(40_000).count16(MAX_BIND_PARAMS).count16(0);
    const b = Buffer.from(w.view());
    expect([b.readUInt16BE(0), b.readUInt16BE(2), b.readUInt16BE(4)]).toEqual([40_000, 65_535, 0]);
  });

  test('past 65,535 (or not a count) it throws a clear error and writes nothing', () => {
    const w = new Writer();
    w.int32(7);
    for (const n of [65_536, 100_000, -1, 1.5]) {
      expect(() => w.count16(n)).toThrow(TooManyBindParamsError);
      expect(w.at).toBe(4);
    }
    expect(() => w.count16(65_536)).toThrow('at most 65,535 bind parameters');
  });
});

describe('an ErrorResponse', () => {
  test('reads every field under one set of names, the unlocalized severity winning', () => {
    const fields: [string, string][] = [
      ['S', 'FEHLER'],
      ['V', 'ERROR'],
      ['C', '23514'],
      ['M', 'value for domain positive violates check constraint'],
      ['s', 'public'],
      ['t', 'things'],
      ['c', 'n'],
      ['d', 'positive'],
      ['n', 'positive_check'],
      ['R', 'ExecConstraints'],
    ];
    const body = Buffer.from(`${fields.map(([k, v]) => `${k}${v}\0`).join('')}\0`);
    const e = readErrorResponse(Buffer.concat([Buffer.from('E....'), body]), 5);
    expect(e).toBeInstanceOf(PostgresError);
    expect({ ...e, message: e.message }).toMatchObject({
      severity: 'ERROR',
      code: '23514',
      message: 'value for domain positive violates check constraint',
      schema: 'public',
      table: 'things',
      column: 'n',
      dataType: 'positive',
      constraint: 'positive_check',
      routine: 'ExecConstraints',
    });
  });
});

describe.each(ENGINES)('a batch refused or failing on %s', (engine) => {
  let db: Db;
  let fresh: FreshDb | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'basalt-wire-writer-'));
  beforeAll(async () => {
    if (engine === 'embedded') {
      const { openEmbedded } = await import('../../src/db/embedded');
      db = await openEmbedded(join(dir, 'pg'));
    } else {
      fresh = await freshDb('external');
      const { openExternal } = await import('../../src/db/external');
      db = await openExternal(fresh.url, { max: 1 });
    }
  }, 120_000);
  afterAll(async () => {
    await db?.close();
    await fresh?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const prepared = async () =>
    (
      await db.atOnce([{ sql: "SELECT name FROM pg_prepared_statements WHERE name LIKE 'basalt_%'", params: [] }])
    )[0]!.rows.map((r) => r.name as string);

  test('is refused before anything is written; the statements queued to close are closed by the next batch', async () => {
    // A batch that fails after its statement was parsed: that statement is queued to be closed.
    const failing = { sql: 'SELECT $1::int AS n /* queued to close */', params: ['not a number'] };
    expect(await db.atOnce([failing]).catch((e) => e.code)).toBe('22P02');
    const before = await prepared();
    // (That batch of the catalog closed the failed one: it went first.) Queue it again.
    expect(await db.atOnce([failing]).catch((e) => e.code)).toBe('22P02');
    const tooMany = { sql: 'SELECT 1', params: Array.from({ length: MAX_BIND_PARAMS + 1 }, () => '1') };
    const refused = await db.atOnce([tooMany]).catch((e) => e);
    expect(refused).toBeInstanceOf(TooManyBindParamsError);
    // The queue survived the refusal: the next batch closes the failed statement first.
    const after = await prepared();
    expect(after).toEqual(before);
    // And the session runs on.
    expect((await db.atOnce([{ sql: 'SELECT $1::int AS n', params: ['5'] }]))[0]!.rows).toEqual([{ n: 5 }]);
  });

  test("a statement's error keeps the fields the engine reads (table, column, constraint)", async () => {
    await db.atOnce([
      { sql: 'CREATE TABLE wire_errors (id int CONSTRAINT wire_errors_pk PRIMARY KEY, n int NOT NULL)', params: [] },
    ]);
    const insert = 'INSERT INTO wire_errors (id, n) VALUES ($1, $2)';
    const missing = await db.atOnce([{ sql: insert, params: ['1', null] }]).catch((e) => e);
    expect(missing).toBeInstanceOf(PgError);
    expect(missing.code).toBe('23502');
    expect(missing.detail).toMatchObject({ schema: 'public', table: 'wire_errors', column: 'n' });
    await db.atOnce([{ sql: insert, params: ['1', '2'] }]);
    const twice = await db.atOnce([{ sql: insert, params: ['1', '2'] }]).catch((e) => e);
    expect(twice.code).toBe('23505');
    expect(twice.detail).toMatchObject({ table: 'wire_errors', constraint: 'wire_errors_pk' });
  });
});
