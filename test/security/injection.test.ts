/**
 * SQL injection at every identifier and value position of the Database API (the probe's
 * sqlmap run, kept as a suite): entity, fields, filter field/op/value, sort
 * field/direction, data keys and values, limit/offset, transaction_id in the body and in
 * the path. Identifiers are refused (4xx) or treated as unknown; values are bound and
 * come back byte for byte; nothing answers 500, echoes SQL, or takes the time a
 * pg_sleep would; the tables are intact afterwards.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, startServer, type Reply, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { ITEMS, TABLE_MIGRATIONS, expectNoInternals, query } from '../database/fixtures';

const PAYLOADS = [
  "'",
  "''",
  '"',
  '\\',
  "' OR '1'='1",
  "' OR 1=1 --",
  '" OR 1=1 --',
  "1' AND pg_sleep(3) IS NULL --",
  '1; SELECT pg_sleep(3) --',
  "'; DROP TABLE items; --",
  '"; DROP TABLE items; --',
  'name"; DROP TABLE items; --',
  '1) OR (1=1',
  '$1',
  '$$; DROP TABLE items; $$',
  "E'\\x27' OR 1=1",
  '1 UNION SELECT key_hash FROM basalt.api_keys --',
  '1 UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL --',
  '(SELECT 1)',
  'CASE WHEN 1=1 THEN pg_sleep(3) END',
  "\\'; DROP TABLE items; --",
  '\u02bc OR 1=1 --',
  '\uff07 OR 1=1 --',
  'items/**/WHERE/**/1=1',
  '%',
  '_',
  'basalt.api_keys',
  'pg_catalog.pg_user',
  'name::text',
  '*',
];

/**
 * Status is one of `allowed`; the body is a format A answer; nothing internal leaks
 * (the payload itself may be quoted back in a message, so it is cut out first).
 */
function expectSafe(r: Reply, allowed: number[], payload?: string): void {
  expect(allowed).toContain(r.status);
  expect(typeof r.body?.success).toBe('boolean');
  let text = r.text;
  if (payload) for (const form of [JSON.stringify(payload).slice(1, -1), payload]) text = text.split(form).join('');
  expectNoInternals(text);
}

describe.each(ENGINES)('SQL injection on %s', (engine) => {
  let s: TestServer;
  let key: string;
  let slowest = 0;
  const timed = async (work: () => Promise<Reply>) => {
    const t0 = performance.now();
    const r = await work();
    slowest = Math.max(slowest, performance.now() - t0);
    return r;
  };
  const q = (body: unknown) => timed(() => query(s, key, body));

  beforeAll(async () => {
    s = await startServer(engine, { migrations: TABLE_MIGRATIONS });
    key = await createKey(s, { permissions: ['db:*'], tables: ['items', 'orders'] });
    expect((await query(s, key, { entity: 'items', action: 'insert', data: ITEMS })).status).toBe(200);
  });
  afterAll(() => s.stop());

  test.each(PAYLOADS)('entity %j', async (p) => {
    expectSafe(await q({ entity: p, action: 'select' }), [403], p);
  });

  test.each(PAYLOADS)('fields[] %j', async (p) => {
    expectSafe(await q({ entity: 'items', action: 'select', fields: ['name', p] }), [400], p);
  });

  test.each(PAYLOADS)('filter field %j', async (p) => {
    expectSafe(await q({ entity: 'items', action: 'select', filters: [{ field: p, op: 'eq', value: 1 }] }), [400], p);
  });

  test.each(PAYLOADS)('filter op %j', async (p) => {
    expectSafe(await q({ entity: 'items', action: 'select', filters: [{ field: 'name', op: p, value: 1 }] }), [400], p);
  });

  test.each(PAYLOADS)('filter value %j (text: bound, matches nothing)', async (p) => {
    for (const op of ['eq', 'neq', 'gt', 'like', 'ilike']) {
      const r = await q({
        entity: 'items',
        action: 'select',
        fields: ['name'],
        filters: [{ field: 'name', op, value: p }],
      });
      // A pattern ending in the escape character `\` is not a pattern: 400 naming the filter.
      expectSafe(r, op.endsWith('like') && p.endsWith('\\') ? [200, 400] : [200], p);
      if (op === 'eq') expect(r.body.data.rows).toEqual([]);
    }
    const inList = await q({
      entity: 'items',
      action: 'select',
      fields: ['name'],
      filters: [{ field: 'name', op: 'in', value: ['apple', p] }],
    });
    expect(inList.body.data.rows).toEqual([{ name: 'apple' }]);
    const notIn = await q({
      entity: 'items',
      action: 'select',
      fields: ['name'],
      filters: [{ field: 'name', op: 'not_in', value: [p] }],
      total: true,
    });
    expect(notIn.status).toBe(200);
  });

  test.each(PAYLOADS)('filter value %j on typed columns → 400, never 500', async (p) => {
    for (const field of ['qty', 'price', 'created_at', 'active', 'id']) {
      expectSafe(await q({ entity: 'items', action: 'select', filters: [{ field, op: 'eq', value: p }] }), [400], p);
    }
    expectSafe(
      await q({ entity: 'orders', action: 'select', filters: [{ field: 'ref', op: 'eq', value: p }] }),
      [400],
      p,
    );
    expectSafe(
      await q({ entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'is_null', value: p }] }),
      [400],
      p,
    );
  });

  test.each(PAYLOADS)('sort field and direction %j', async (p) => {
    expectSafe(await q({ entity: 'items', action: 'select', sort: [{ field: p }] }), [400], p);
    expectSafe(await q({ entity: 'items', action: 'select', sort: [{ field: 'name', direction: p }] }), [400], p);
  });

  test.each(PAYLOADS)('data key %j on insert and update', async (p) => {
    expectSafe(await q({ entity: 'items', action: 'insert', data: { name: `k-${p}`, [p]: 1 } }), [400], p);
    expectSafe(
      await q({
        entity: 'items',
        action: 'update',
        data: { [p]: 1 },
        filters: [{ field: 'name', op: 'eq', value: 'apple' }],
      }),
      [400],
      p,
    );
  });

  test.each(PAYLOADS.map((p, i) => [p, i] as const))('data value %j is stored byte for byte', async (p, i) => {
    const name = `v${i}-${p}`;
    const ins = await q({
      entity: 'items',
      action: 'insert',
      data: { name, category: p.slice(0, 12) },
      fields: ['id', 'name', 'category'],
    });
    expect(ins.status).toBe(200); // the payload comes back as data, so no check for SQL-looking text here
    expect(ins.body.data.rows[0]).toMatchObject({ name, category: p.slice(0, 12) });
    const id = ins.body.data.rows[0].id;
    const upd = await q({
      entity: 'items',
      action: 'update',
      data: { name: `${name}!` },
      filters: [{ field: 'id', op: 'eq', value: id }],
      fields: ['name'],
    });
    expect(upd.body.data.rows).toEqual([{ name: `${name}!` }]);
    const back = await q({
      entity: 'items',
      action: 'select',
      fields: ['name'],
      filters: [{ field: 'name', op: 'eq', value: `${name}!` }],
    });
    expect(back.body.data.rows).toEqual([{ name: `${name}!` }]);
    const del = await q({ entity: 'items', action: 'delete', filters: [{ field: 'id', op: 'eq', value: id }] });
    expect(del.body.data.count).toBe(1);
  });

  test.each(PAYLOADS)('limit, offset and total %j → 400', async (p) => {
    expectSafe(await q({ entity: 'items', action: 'select', limit: p }), [400], p);
    expectSafe(await q({ entity: 'items', action: 'select', offset: p }), [400], p);
    expectSafe(await q({ entity: 'items', action: 'select', total: p }), [400], p);
  });

  test.each(PAYLOADS)('transaction_id %j in the body and in the path', async (p) => {
    expectSafe(await q({ entity: 'items', action: 'select', transaction_id: p }), [400, 404], p);
    for (const end of ['commit', 'rollback']) {
      const r = await timed(() =>
        s.req('POST', `/api/v1/db/transaction/${encodeURIComponent(p)}/${end}`, {
          headers: { 'x-api-key': key },
          body: {},
        }),
      );
      expectSafe(r, [400, 404], p);
    }
  });

  test('NUL in identifiers and values → 4xx, never 500', async () => {
    expectSafe(await q({ entity: 'items\u0000', action: 'select' }), [403]);
    expectSafe(await q({ entity: 'items', action: 'select', fields: ['name\u0000'] }), [400]);
    expectSafe(
      await q({ entity: 'items', action: 'select', filters: [{ field: 'name', op: 'eq', value: 'a\u0000b' }] }),
      [200, 400],
    );
    expectSafe(await q({ entity: 'items', action: 'insert', data: { name: 'nul\u0000name' } }), [400]);
  });

  test('afterwards: every table intact, nothing smuggled in, no payload slept', async () => {
    const all = await q({ entity: 'items', action: 'select', fields: ['name'], sort: [{ field: 'id' }], limit: 1000 });
    expect(all.body.data.rows.map((r: { name: string }) => r.name)).toEqual(ITEMS.map((i) => i.name));
    if (ON_SOURCE) {
      const tables = await s.platform.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_tables WHERE (schemaname, tablename) IN (('public','items'), ('public','orders'), ('basalt','api_keys'), ('basalt','users'))",
      );
      expect(tables.rows[0]!.n).toBe(4);
    }
    expect(slowest).toBeLessThan(2500);
  });
});
