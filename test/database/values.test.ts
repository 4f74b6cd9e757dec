import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { expectError, query } from './fixtures';

const TABLE = `
CREATE TYPE public.mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE public.vals (
  id serial PRIMARY KEY,
  i2 int2, i4 int4, i8 int8, num numeric, num2 numeric(6,2), f8 float8, f4 float4, b boolean,
  t text, vc varchar(5), ts timestamptz, tsn timestamp, d date, tm time, iv interval,
  j json, jb jsonb, u uuid, by bytea, m public.mood,
  ta text[], ia int4[], i8a int8[], na numeric[], ba boolean[], tsa timestamptz[], bya bytea[], jba jsonb[], ia2 int4[][], ua uuid[], ma public.mood[]
);`;

// column, value sent, value expected back (same as sent when omitted)
const CASES: [string, unknown, unknown?][] = [
  ['i2', -32768],
  ['i4', 2147483647],
  ['i8', '9007199254740993'],
  ['i8', 42, '42'],
  ['i8', '-9223372036854775808'],
  ['num', '12345678901234567890.123456789'],
  ['num', 1.5, '1.5'],
  ['num2', '12.30'],
  ['num', 'NaN'],
  ['f8', 1.25],
  ['f8', 'Infinity'],
  ['f4', 0.5],
  ['b', true],
  ['b', false],
  ['t', 'héllo "wörld" \' ; -- {a,b} \\ 😀'],
  ['t', ''],
  ['vc', 'abcde'],
  ['ts', '2024-01-02T03:04:05.123456Z'],
  ['ts', '2024-01-02T05:04:05.5+02:00', '2024-01-02T03:04:05.5Z'],
  ['tsn', '2024-02-29T23:59:59.999999'],
  ['d', '2024-02-29'],
  ['tm', '10:00:01.5'],
  ['iv', '1 day 02:00:00'],
  ['j', { a: [1, 'x', null, { b: true }], s: 'q"uote' }],
  ['j', 'just a string'],
  ['j', 3.5],
  ['jb', { nested: { list: [1, 2, 3], empty: {} }, n: null }],
  ['jb', [1, '2', [3]]],
  ['u', '3f2504e0-4f89-11d3-9a0c-0305e82c3301'],
  ['by', '3q2+7w=='],
  ['by', ''],
  ['by', Buffer.from(Uint8Array.from({ length: 256 }, (_, i) => i)).toString('base64')],
  ['m', 'happy'],
  ['ta', ['a', 'b,c', '"q"', null, '{x}', 'back\\slash', 'NULL', '']],
  ['ia', [1, null, -3]],
  ['i8a', ['9007199254740993', '1']],
  ['na', ['1.50', '-0.001']],
  ['ba', [true, false, null]],
  ['tsa', ['2024-01-02T03:04:05Z', null]],
  ['bya', ['3q0=', null]],
  ['jba', [{ a: 1 }, [1, 2], 'x', null]],
  [
    'ia2',
    [
      [1, 2],
      [3, null],
    ],
  ],
  ['ua', ['3f2504e0-4f89-11d3-9a0c-0305e82c3301']],
  ['ma', ['sad', 'ok']],
  ['ta', []],
  ['jb', null],
  ['ia', null],
];

describe.each(ENGINES)('Database API values on %s', (engine) => {
  let s: TestServer;
  let key: string;
  const q = (body: unknown) => query(s, key, body);

  beforeAll(async () => {
    s = await startServer(engine, { migrations: { '001_vals.sql': TABLE } });
    key = await createKey(s, { type: 'service', service: 'vals', permissions: ['db:query'], tables: ['vals'] });
  });
  afterAll(() => s.stop());

  test.each(CASES)('%s: %j round-trips', async (col, sent, expected = sent) => {
    const ins = await q({ entity: 'vals', action: 'insert', data: { [col]: sent }, fields: ['id', col] });
    expect(ins.status).toBe(200);
    expect(ins.body.data.rows[0][col]).toEqual(expected);
    const id = ins.body.data.rows[0].id;
    const sel = await q({
      entity: 'vals',
      action: 'select',
      fields: [col],
      filters: [{ field: 'id', op: 'eq', value: id }],
    });
    expect(sel.body.data.rows).toEqual([{ [col]: expected }]);
    // The value written back as read comes back unchanged (a client can round-trip it).
    const up = await q({
      entity: 'vals',
      action: 'update',
      data: { [col]: expected },
      filters: [{ field: 'id', op: 'eq', value: id }],
      fields: [col],
    });
    expect(up.body.data.rows).toEqual([{ [col]: expected }]);
  });

  test.each([
    ['i8', '9007199254740993'],
    ['num', '1.5'],
    ['ts', '2024-01-02T03:04:05.123456Z'],
    ['d', '2024-02-29'],
    ['u', '3f2504e0-4f89-11d3-9a0c-0305e82c3301'],
    ['by', '3q2+7w=='],
    ['m', 'happy'],
    ['jb', { nested: { list: [1, 2, 3], empty: {} }, n: null }],
  ])('filter eq on %s finds %j', async (col, value) => {
    const r = await q({ entity: 'vals', action: 'select', fields: [col], filters: [{ field: col, op: 'eq', value }] });
    expect(r.status).toBe(200);
    expect(r.body.data.count).toBeGreaterThan(0);
    for (const row of r.body.data.rows) expect(row[col]).toEqual(value);
  });

  test.each([
    ['by', 'not base64!'],
    ['u', 'nope'],
    ['b', 'yes'],
    ['ia', 'not an array'],
    ['ia', [1, 'x']],
    ['m', 'furious'],
    ['d', '2024-02-30'],
    ['i2', 40000],
    ['vc', 'toolong'],
    ['num2', '99999.99'],
    ['f8', { x: 1 }],
  ])('%s refuses %j with 400 naming the column', async (col, value) => {
    const r = await q({ entity: 'vals', action: 'insert', data: { [col]: value } });
    expectError(r, 400, 'validation_error');
    expect(r.body.error.details.column).toBe(col);
  });

  test('in / not_in on uuid, int8 and enum columns', async () => {
    const r = await q({
      entity: 'vals',
      action: 'select',
      fields: ['m'],
      filters: [{ field: 'm', op: 'in', value: ['happy', 'ok'] }],
    });
    expect(r.body.data.rows.every((x: any) => x.m === 'happy')).toBe(true);
    const n = await q({
      entity: 'vals',
      action: 'select',
      fields: ['i8'],
      filters: [
        { field: 'i8', op: 'not_in', value: ['42'] },
        { field: 'i8', op: 'is_null', value: false },
      ],
    });
    expect(n.body.data.rows.map((x: any) => x.i8).sort()).toEqual(['-9223372036854775808', '9007199254740993']);
  });

  // Columns read through an expression (dates, timestamps, arrays) sort by their value, not by
  // the text the API sends: year 10000 after 9999, {10} after {9}.
  test.each([
    ['d', ['10000-01-01', '9999-12-31', '2024-02-29']],
    ['ia', [[10], [9], [2, 1]]],
  ])('sort on %s is by value', async (col, values) => {
    const own = await q({
      entity: 'vals',
      action: 'insert',
      data: values.map((v) => ({ [col]: v, t: `sort-${col}` })),
      fields: ['id'],
    });
    expect(own.status).toBe(200);
    for (const dir of ['asc', 'desc'] as const) {
      const r = await q({
        entity: 'vals',
        action: 'select',
        fields: [col],
        filters: [{ field: 't', op: 'eq', value: `sort-${col}` }],
        sort: [{ field: col, direction: dir }],
      });
      expect(r.status).toBe(200);
      const asc = col === 'd' ? ['2024-02-29', '9999-12-31', '10000-01-01'] : [[2, 1], [9], [10]];
      expect(r.body.data.rows.map((x: any) => x[col])).toEqual(dir === 'asc' ? asc : [...asc].reverse());
    }
  });
});
