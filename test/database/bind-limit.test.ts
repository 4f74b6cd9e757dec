/**
 * PostgreSQL's limit on the values of one statement (docs/database.md, "Limits"): 65,535 bind
 * parameters, counted in 16 bits, unsigned, by the protocol. With the default settings a request
 * reaches it through a wide table (web.max_json_items lets 10,000 rows through, each of many
 * columns). A request up to it runs (from 32,768 values on, the wire writer used to take the
 * count as signed: 500); one past it is refused with 400 validation_error naming the limit,
 * before anything reaches the database; either way the next requests on the same connection
 * run. Both engines, on the executable.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { expectA } from '../helpers/envelopes';
import { expectError, query } from './fixtures';

/** PostgreSQL's limit, and a table of 15 columns: 4,369 rows are exactly 65,535 values. */
const LIMIT = 65_535;
const COLUMNS = Array.from({ length: 15 }, (_, i) => `c${i + 1}`);
const WIDE = `CREATE TABLE public.wide (${COLUMNS.map((c, i) => `${c} int${i === 0 ? ' PRIMARY KEY' : ''}`).join(', ')})`;
const rows = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => Object.fromEntries(COLUMNS.map((c, j) => [c, j === 0 ? from + i : j])));

describe.each(ENGINES)('the bind parameter limit on %s', (engine) => {
  let s: TestServer;
  let key: string;
  const q = (body: Record<string, unknown>) => query(s, key, { entity: 'wide', ...body });
  const count = async () =>
    expectA(await q({ action: 'select', fields: ['c1'], limit: 1, total: true }), 200).total as number;
  const clear = async () => {
    expectA(await q({ action: 'delete', fields: ['c1'], filters: [{ field: 'c1', op: 'gt', value: 0 }] }), 200);
    expect(await count()).toBe(0);
  };
  /** An insert of `n` rows (15 values each): its count. */
  const insert = async (n: number, from = 1) =>
    expectA(await q({ action: 'insert', fields: ['c1'], data: rows(from, n) }), 200).count as number;

  beforeAll(async () => {
    s = await startServer(engine, { migrations: { '001_wide.sql': WIDE } });
    key = await createKey(s, { type: 'service', service: 'bulk', permissions: ['db:query'], tables: ['wide'] });
  }, 120_000);
  afterAll(() => s.stop());

  test('an insert of 37,500 values (past a signed 16-bit count) runs, and so do the requests after it', async () => {
    expect(await insert(2_500)).toBe(2_500);
    expect(await count()).toBe(2_500);
    await clear();
  }, 120_000);

  test('an insert of exactly 65,535 values runs', async () => {
    expect(4_369 * COLUMNS.length).toBe(LIMIT);
    expect(await insert(4_369)).toBe(4_369);
    expect(await count()).toBe(4_369);
    await clear();
  }, 120_000);

  test('past 65,535 values: 400 naming the limit and what to do; nothing is written, the next requests run', async () => {
    const r = await q({ action: 'insert', data: rows(1, 4_370) });
    expectError(r, 400, 'validation_error');
    expect(r.body.error.message).toContain('65,535');
    expect(r.body.error.message).toContain('several requests');
    expect(Object.keys(r.body.error.details.fields)).toEqual(['data']);
    expect(await count()).toBe(0);
    // The same, split in two, runs.
    expect(await insert(2_185)).toBe(2_185);
    expect(await insert(2_185, 2_186)).toBe(2_185);
    expect(await count()).toBe(4_370);
    await clear();
  }, 120_000);

  test('an in list is one value, however long', async () => {
    expect(await insert(3)).toBe(3);
    const list = Array.from({ length: 10_000 }, (_, i) => i + 1);
    const r = await q({ action: 'select', fields: ['c1'], filters: [{ field: 'c1', op: 'in', value: list }] });
    expect(expectA(r, 200).rows.map((x: { c1: number }) => x.c1)).toEqual([1, 2, 3]);
    await clear();
  }, 120_000);
});
