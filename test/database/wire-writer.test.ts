/**
 * The wire writer's counts of bind parameters (src/db/wire-writer.ts): 16 bits, unsigned, as
 * PostgreSQL reads them; past 65,535 it refuses before writing anything, and a batch refused so
 * keeps what its session had queued (statements to close). Both engines' wire paths, on the
 * source (the HTTP side: ./bind-limit.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_BIND_PARAMS, TooManyBindParamsError, Writer } from '../../src/db/wire-writer';
import type { Db } from '../../src/db/engine';
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

describe.each(ENGINES)('a batch past the limit on %s', (engine) => {
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
});
