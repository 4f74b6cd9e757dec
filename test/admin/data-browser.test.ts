/**
 * The admin data browser service (src/modules/database/browser/),
 * called directly on a real platform, on every engine.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { openBasalt, type Basalt } from '../../src/services';
import { AppError } from '../../src/http/errors';
import { createDataBrowser, type DataBrowser } from '../../src/modules/database/browser/browser';

const SCHEMA = `
CREATE TABLE public.items (
  id serial PRIMARY KEY,
  name text NOT NULL UNIQUE,
  qty int4,
  price numeric(10,2),
  category varchar(12),
  active boolean NOT NULL DEFAULT true,
  big int8,
  meta jsonb,
  blob bytea,
  tags text[],
  day date,
  CONSTRAINT qty_not_negative CHECK (qty >= 0)
);
CREATE TABLE public.nokey (a int4, b text);
CREATE TABLE public.pairs (a int4, b text, v text, PRIMARY KEY (b, a));
CREATE TABLE public.mixed (id int4 PRIMARY KEY, grp int4, label text, at timestamptz);
CREATE TABLE public.big (id int4 PRIMARY KEY, n int4 NOT NULL, payload text NOT NULL);
CREATE INDEX big_n ON public.big (n);
CREATE TABLE public.csvx (id int4 PRIMARY KEY, t text, j jsonb, bin bytea, arr int4[], n numeric, ok boolean, "odd, name" text);
CREATE TABLE public.csvy (LIKE public.csvx INCLUDING ALL);
`;

const ITEMS = [
  { name: 'apple', qty: 5, price: '1.20', category: 'fruit', active: true },
  { name: 'banana', qty: 0, price: '0.50', category: 'fruit', active: true },
  { name: 'Carrot', qty: 12, price: '0.80', category: 'veg', active: false },
  { name: 'date', qty: null, price: '3.00', category: null, active: true },
  { name: 'eggplant', qty: 7, price: null, category: 'veg', active: true },
];

const BIG_ROWS = 150_000;

/** Resolves to the AppError a promise rejects with (fails if it resolves). */
async function appError(p: Promise<unknown> | (() => Promise<unknown>)): Promise<AppError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
  throw new Error('expected an AppError');
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(stream).text();
}

describe.each(ENGINES)('admin data browser on %s', (engine) => {
  let db: FreshDb;
  let p: Basalt;
  let b: DataBrowser;
  const tx = <T>(fn: (q: import('../../src/db/engine').Queryable) => Promise<T>) => p.db.transaction(fn);

  beforeAll(async () => {
    db = await freshDb(engine);
    p = await openBasalt({
      env: { ...db.env, BASALT_LOG_LEVEL: 'silent', BASALT_DB_TRANSACTION_IDLE_TIMEOUT_MS: '1000' },
      migrate: false,
    });
    await p.db.exec(SCHEMA);
    b = createDataBrowser(p, p.services.database);
    for (const it of ITEMS) await tx((q) => b.insert(q, 'items', it));
    await p.db.exec(`
      INSERT INTO public.mixed SELECT i, CASE WHEN i % 11 = 0 THEN NULL ELSE i % 7 END, 'r' || i,
        CASE WHEN i % 13 = 0 THEN NULL ELSE timestamptz '2024-01-01 00:00:00+00' + (i % 50) * interval '1.5 second' END
        FROM generate_series(1, 2500) i;
      INSERT INTO public.nokey SELECT i % 100, 'b' || i FROM generate_series(1, 2500) i;
      INSERT INTO public.big SELECT i, (i * 7919) % 100000, repeat('x', 300) || i FROM generate_series(1, ${BIG_ROWS}) i;
      ANALYZE public.big;
    `);
  }, 120_000);
  afterAll(async () => {
    await p?.shutdown();
    await db?.drop();
  });

  test('tables: the data schema only, with columns, types, defaults and primary keys', async () => {
    const tables = await b.tables();
    const names = tables.map((t) => t.name);
    expect(names).toEqual(['big', 'csvx', 'csvy', 'items', 'mixed', 'nokey', 'pairs']);
    const items = tables.find((t) => t.name === 'items')!;
    expect(items.primary_key).toEqual(['id']);
    expect(items.columns.slice(0, 6)).toEqual([
      { name: 'id', type: 'integer', nullable: false, has_default: true, references: null },
      { name: 'name', type: 'text', nullable: false, has_default: false, references: null },
      { name: 'qty', type: 'integer', nullable: true, has_default: false, references: null },
      { name: 'price', type: 'numeric(10,2)', nullable: true, has_default: false, references: null },
      { name: 'category', type: 'character varying(12)', nullable: true, has_default: false, references: null },
      { name: 'active', type: 'boolean', nullable: false, has_default: true, references: null },
    ]);
    expect(items.columns.find((c) => c.name === 'tags')!.type).toBe('text[]');
    expect(tables.find((t) => t.name === 'nokey')!.primary_key).toEqual([]);
    expect(tables.find((t) => t.name === 'pairs')!.primary_key).toEqual(['b', 'a']);
    const big = tables.find((t) => t.name === 'big')!;
    // Over LIST_EXACT_MAX rows: no exact count, the planner's estimate.
    expect(big.rows).toBeNull();
    expect(big.estimated_rows).toBeGreaterThan(BIG_ROWS * 0.8);
    expect(big.estimated_rows).toBeLessThan(BIG_ROWS * 1.2);
    for (const t of tables) expect(t.estimated_rows).toBeGreaterThanOrEqual(0);
    // Small tables are counted exactly, whatever the planner thinks (a never-analyzed table plans as hundreds of rows).
    const exact = await p.db.query<{ n: string }>('SELECT count(*)::int8 AS n FROM items');
    expect(items.rows).toBe(Number(exact.rows[0]!.n));
    expect(items.estimated_rows).toBe(items.rows!);
  });

  test('platform tables are not reachable', async () => {
    const r = await p.db.query<{ relname: string }>(
      `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'basalt' AND c.relkind = 'r' ORDER BY 1`,
    );
    expect(r.rows.length).toBeGreaterThan(0);
    for (const { relname } of r.rows.slice(0, 5)) {
      const e = await appError(b.select(relname, {}));
      expect([e.status, e.code]).toEqual([404, 'not_found']);
    }
    for (const name of ['basalt.settings', 'pg_catalog.pg_class', 'pg_class', 'nope']) {
      const e = await appError(b.select(name, {}));
      expect([e.status, e.code]).toEqual([404, 'not_found']);
    }
    expect((await appError(tx((q) => b.insert(q, 'schema_migrations', { name: 'x' })))).status).toBe(404);
    expect((await appError(readAll(b.exportCsv('nope', {})))).status).toBe(404);
  });

  const names = (rows: Record<string, unknown>[]) => rows.map((r) => r.name);
  test.each([
    ['eq', [{ field: 'category', op: 'eq', value: 'veg' }], ['Carrot', 'eggplant']],
    ['neq', [{ field: 'category', op: 'neq', value: 'veg' }], ['apple', 'banana']],
    ['gt', [{ field: 'qty', op: 'gt', value: 5 }], ['Carrot', 'eggplant']],
    ['gte', [{ field: 'qty', op: 'gte', value: 5 }], ['apple', 'Carrot', 'eggplant']],
    ['lt', [{ field: 'price', op: 'lt', value: '0.80' }], ['banana']],
    ['lte', [{ field: 'price', op: 'lte', value: 0.8 }], ['banana', 'Carrot']],
    ['in', [{ field: 'name', op: 'in', value: ['apple', 'date', 'nope'] }], ['apple', 'date']],
    ['not_in', [{ field: 'qty', op: 'not_in', value: [0, 5] }], ['Carrot', 'eggplant']],
    ['like', [{ field: 'name', op: 'like', value: '%a%' }], ['apple', 'banana', 'Carrot', 'date', 'eggplant']],
    ['ilike', [{ field: 'name', op: 'ilike', value: 'c%' }], ['Carrot']],
    ['is_null true', [{ field: 'qty', op: 'is_null', value: true }], ['date']],
    ['is_null false', [{ field: 'price', op: 'is_null', value: false }], ['apple', 'banana', 'Carrot', 'date']],
    [
      'AND of two',
      [
        { field: 'category', op: 'eq', value: 'fruit' },
        { field: 'qty', op: 'gt', value: 0 },
      ],
      ['apple'],
    ],
  ])('select with operator %s', async (_n, filters, expected) => {
    const r = await b.select('items', { filters: filters as any });
    expect(names(r.rows)).toEqual(expected);
    expect(r.count).toBe(expected.length);
    expect(r.total).toBe(expected.length);
    expect(r.estimated_total).toBe(expected.length);
  });

  test('sort, paging, default and maximum limit', async () => {
    expect(names((await b.select('items', { sort: [{ field: 'name', direction: 'DESC' }] })).rows)).toEqual([
      'eggplant',
      'date',
      'banana',
      'apple',
      'Carrot',
    ]);
    // Equal sort values keep the primary key order, so pages are stable.
    const byCat = await b.select('items', { sort: [{ field: 'category' }], limit: 2, offset: 1 });
    expect(names(byCat.rows)).toEqual(['banana', 'Carrot']);
    expect(byCat.total).toBe(5);
    const page = await b.select('mixed', {});
    expect(page.count).toBe(50);
    expect(page.rows[0]!.id).toBe(1);
    expect(page.total).toBe(2500);
    expect((await b.select('mixed', { limit: 500, offset: 2400 })).count).toBe(100);
    // Timestamps are ordered by value (not by their ISO text), NULLs first when descending.
    const byAt = await b.select('mixed', { sort: [{ field: 'at', direction: 'desc' }], limit: 500, offset: 100 });
    const sqlOrder = await p.db.query<{ id: number }>(
      'SELECT id FROM public.mixed ORDER BY at DESC, id LIMIT 500 OFFSET 100',
    );
    expect(byAt.rows.map((r) => r.id)).toEqual(sqlOrder.rows.map((r) => r.id));
    const e = await appError(b.select('mixed', { limit: 501 }));
    expect([e.status, e.code, Object.keys((e.extra.details as any).fields)]).toEqual([
      400,
      'validation_error',
      ['limit'],
    ]);
    expect((await appError(b.select('mixed', { limit: -1 }))).status).toBe(400);
  });

  test('unknown column, operator or direction → 400 naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ filters: [{ field: 'nope', op: 'eq', value: 1 }] }, 'filters[0].field'],
      [{ filters: [{ field: 'qty', op: 'between', value: 1 }] }, 'filters[0].op'],
      [{ filters: [{ field: 'qty', op: 'eq', value: 'abc' }] }, 'qty'],
      [{ sort: [{ field: 'nope' }] }, 'sort[0].field'],
      [{ sort: [{ field: 'qty', direction: 'up' }] }, 'sort[0].direction'],
    ];
    for (const [q, field] of cases) {
      const e = await appError(b.select('items', q as any));
      expect([e.status, e.code]).toEqual([400, 'validation_error']);
      expect(Object.keys((e.extra.details as any).fields)).toEqual([field]);
    }
  });

  test('estimated and exact totals', async () => {
    const all = await b.select('big', { limit: 5 });
    expect(all.total).toBeUndefined(); // over 100,000 rows: no count(*)
    expect(all.estimated_total).toBeGreaterThan(BIG_ROWS * 0.8);
    expect(all.estimated_total).toBeLessThan(BIG_ROWS * 1.2);
    const some = await b.select('big', {
      filters: [{ field: 'id', op: 'lte', value: 2000 }],
      sort: [{ field: 'n', direction: 'desc' }],
      limit: 3,
    });
    expect(some.total).toBeUndefined();
    expect(some.estimated_total).toBeGreaterThan(1000);
    expect(some.estimated_total).toBeLessThan(4000);
    expect(some.rows.map((r) => r.n)).toEqual([...some.rows.map((r) => r.n as number)].sort((x, y) => y - x));
    const small = await b.select('mixed', { filters: [{ field: 'grp', op: 'eq', value: 3 }] });
    expect(small.total).toBe(
      ((await p.db.query<{ c: string }>('SELECT count(*)::text AS c FROM public.mixed WHERE grp = 3')).rows[0]!
        .c as unknown as number) * 1,
    );
  });

  test('insert, update, delete with values in the API representation', async () => {
    const row = await tx((q) =>
      b.insert(q, 'items', {
        name: 'fig',
        qty: 3,
        big: '9007199254740993',
        meta: { a: [1, 'x'] },
        blob: 'AAEC/w==',
        tags: ['a', null, 'c"d'],
        day: '2024-02-29',
      }),
    );
    expect(row).toMatchObject({
      name: 'fig',
      qty: 3,
      big: '9007199254740993',
      meta: { a: [1, 'x'] },
      blob: 'AAEC/w==',
      tags: ['a', null, 'c"d'],
      day: '2024-02-29',
      active: true,
    });
    const id = row.id as number;
    const upd = await tx((q) => b.update(q, 'items', { id }, { qty: 4, category: 'fruit' }));
    expect(upd).toMatchObject({ id, qty: 4, category: 'fruit', name: 'fig' });

    const conflict = await appError(tx((q) => b.insert(q, 'items', { name: 'fig' })));
    expect([conflict.status, conflict.code]).toEqual([409, 'conflict']);
    const check = await appError(tx((q) => b.update(q, 'items', { id }, { qty: -1 })));
    expect([check.status, check.code]).toEqual([400, 'validation_error']);
    const badDate = await appError(tx((q) => b.insert(q, 'items', { name: 'x', day: '2024-13-45' })));
    expect([badDate.status, (badDate.extra.details as any).column]).toEqual([400, 'day']);
    const unknownCol = await appError(tx((q) => b.insert(q, 'items', { name: 'y', nope: 1 })));
    expect(Object.keys((unknownCol.extra.details as any).fields)).toEqual(['data.nope']);

    expect(
      Object.keys((await appError(tx((q) => b.update(q, 'items', {}, { qty: 1 })))).extra.details!.fields as object),
    ).toEqual(['key.id']);
    expect(
      Object.keys(
        (await appError(tx((q) => b.update(q, 'items', { id, name: 'fig' }, { qty: 1 })))).extra.details!
          .fields as object,
      ),
    ).toEqual(['key.name']);
    expect(
      Object.keys(
        (await appError(tx((q) => b.update(q, 'items', { id: 'abc' }, { qty: 1 })))).extra.details!.fields as object,
      ),
    ).toEqual(['key.id']);
    expect((await appError(tx((q) => b.update(q, 'items', { id: 999999 }, { qty: 1 })))).status).toBe(404);
    expect((await appError(tx((q) => b.update(q, 'items', { id }, {})))).status).toBe(400);

    expect(await tx((q) => b.deleteRows(q, 'items', [{ id }, { id: 999999 }]))).toBe(1);
    expect((await b.select('items', { filters: [{ field: 'name', op: 'eq', value: 'fig' }] })).count).toBe(0);
  });

  test('bulk delete is all or nothing in the caller transaction; composite keys', async () => {
    await tx(async (q) => {
      for (let i = 0; i < 5; i++) await b.insert(q, 'pairs', { a: i, b: i % 2 ? 'odd' : 'even', v: 'v' + i });
    });
    const keys = [0, 1, 2].map((a) => ({ a, b: a % 2 ? 'odd' : 'even' }));
    await appError(
      tx(async (q) => {
        expect(await b.deleteRows(q, 'pairs', keys)).toBe(3);
        throw new AppError(400, 'validation_error', 'abort');
      }),
    );
    expect((await b.select('pairs', {})).total).toBe(5);
    expect(await tx((q) => b.deleteRows(q, 'pairs', keys))).toBe(3);
    expect((await b.select('pairs', {})).rows.map((r) => r.a)).toEqual([4, 3]); // key order: b, a
    expect(await tx((q) => b.update(q, 'pairs', { a: 4, b: 'even' }, { v: 'w' }))).toMatchObject({
      a: 4,
      b: 'even',
      v: 'w',
    });
    expect((await appError(tx((q) => b.deleteRows(q, 'pairs', [])))).status).toBe(400);
    expect(
      (
        await appError(
          tx((q) =>
            b.deleteRows(
              q,
              'pairs',
              Array.from({ length: 1001 }, () => ({ a: 1, b: 'x' })),
            ),
          ),
        )
      ).status,
    ).toBe(400);
    expect(
      Object.keys((await appError(tx((q) => b.deleteRows(q, 'pairs', [{ a: 1 }])))).extra.details!.fields as object),
    ).toEqual(['keys[0].b']);
  });

  test('a table without a primary key: browse, export, insert; no update or delete', async () => {
    expect((await b.select('nokey', { limit: 3 })).count).toBe(3);
    expect(await tx((q) => b.insert(q, 'nokey', { a: -1, b: 'new' }))).toEqual({ a: -1, b: 'new' });
    for (const e of [
      await appError(tx((q) => b.update(q, 'nokey', { a: 1 }, { b: 'x' }))),
      await appError(tx((q) => b.deleteRows(q, 'nokey', [{ a: 1 }]))),
    ]) {
      expect([e.status, e.code]).toEqual([400, 'validation_error']);
      expect(e.message).toContain('no primary key');
    }
    const csv = await readAll(b.exportCsv('nokey', { sort: [{ field: 'a' }, { field: 'b' }] }));
    const lines = csv.split('\r\n').filter(Boolean);
    expect(lines.length).toBe(2502);
    expect(lines[0]).toBe('a,b');
    expect(lines[1]).toBe('-1,new');
    expect(new Set(lines).size).toBe(2502);
  });

  test('CSV export: header, RFC 4180 quoting, NULL as empty, json, bytea, arrays', async () => {
    await tx(async (q) => {
      await b.insert(q, 'csvx', {
        id: 1,
        t: 'plain',
        j: { k: 'v, "q"' },
        bin: 'AAEC',
        arr: [1, null, 3],
        n: '1.50',
        ok: true,
        'odd, name': 'x',
      });
      await b.insert(q, 'csvx', {
        id: 2,
        t: 'comma, "quote"\r\nnewline',
        j: 'str',
        bin: null,
        arr: [],
        n: null,
        ok: false,
        'odd, name': '',
      });
      await b.insert(q, 'csvx', {
        id: 3,
        t: null,
        j: null,
        bin: '',
        arr: null,
        n: '-0.001',
        ok: null,
        'odd, name': null,
      });
    });
    const csv = await readAll(b.exportCsv('csvx', {}));
    expect(csv).toBe(
      'id,t,j,bin,arr,n,ok,"odd, name"\r\n' +
        '1,plain,"{""k"":""v, \\""q\\""""}",AAEC,"[1,null,3]",1.50,true,x\r\n' +
        '2,"comma, ""quote""\r\nnewline","""str""",,[],,false,""\r\n' +
        '3,,,"",,-0.001,,\r\n',
    );
    // Filters and sort apply.
    expect(
      await readAll(
        b.exportCsv('csvx', {
          filters: [{ field: 'id', op: 'gte', value: 2 }],
          sort: [{ field: 'id', direction: 'desc' }],
        }),
      ),
    ).toMatch(/^id,.*\r\n3,.*\r\n2,/s);
    // A bad filter rejects the first read.
    const e = await appError(readAll(b.exportCsv('csvx', { filters: [{ field: 'nope', op: 'eq', value: 1 }] })));
    expect(Object.keys((e.extra.details as any).fields)).toEqual(['filters[0].field']);
    // What was exported imports back unchanged.
    expect(await tx((q) => b.importCsv(q, 'csvy', csv))).toEqual({ inserted: 3 });
    expect(await readAll(b.exportCsv('csvy', {}))).toBe(csv);
  });

  test.each([
    ['asc', [{ field: 'grp' }], 'grp ASC, id'],
    ['desc (NULLs first)', [{ field: 'grp', direction: 'desc' }], 'grp DESC, id'],
    ['desc then asc on a timestamp', [{ field: 'at', direction: 'desc' }, { field: 'grp' }], 'at DESC, grp ASC, id'],
    ['desc primary key', [{ field: 'id', direction: 'desc' }], 'id DESC'],
  ])('CSV export pages by keyset in the order asked: %s', async (_n, sort, orderSql) => {
    const csv = await readAll(
      b.exportCsv('mixed', { sort: sort as any, filters: [{ field: 'id', op: 'gt', value: 10 }] }),
    );
    const ids = csv
      .split('\r\n')
      .slice(1, -1)
      .map((l) => Number(l.split(',')[0]));
    const expected = (
      await p.db.query<{ id: number }>(`SELECT id FROM public.mixed WHERE id > 10 ORDER BY ${orderSql}`)
    ).rows.map((r) => r.id);
    expect(ids.length).toBe(2490);
    expect(ids).toEqual(expected);
  });

  test(`CSV export of ${BIG_ROWS.toLocaleString('en-US')} rows streams in bounded batches and memory`, async () => {
    Bun.gc(true);
    const base = process.memoryUsage();
    const reader = b.exportCsv('big', {}).getReader();
    let chunks = 0;
    let bytes = 0;
    let maxChunk = 0;
    let newlines = 0;
    let maxHeap = 0;
    let maxRss = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      chunks++;
      bytes += value.length;
      maxChunk = Math.max(maxChunk, value.length);
      for (let i = 0; i < value.length; i++) if (value[i] === 10) newlines++;
      if (chunks % 25 === 0) {
        Bun.gc(true);
        const m = process.memoryUsage();
        maxHeap = Math.max(maxHeap, m.heapUsed - base.heapUsed);
        maxRss = Math.max(maxRss, m.rss - base.rss);
      }
    }
    expect(newlines).toBe(BIG_ROWS + 1);
    expect(bytes).toBeGreaterThan(BIG_ROWS * 300);
    expect(chunks).toBeGreaterThanOrEqual(BIG_ROWS / 1000);
    expect(maxChunk).toBeLessThan(3 << 20);
    // The whole export is ~47 MB; what stays alive at once is about one batch.
    expect(maxHeap).toBeLessThan(24 << 20);
    console.log(
      `${engine}: export ${BIG_ROWS} rows, ${(bytes / 1048576).toFixed(1)} MiB in ${chunks} chunks (max ${(maxChunk / 1024).toFixed(0)} KiB); heap growth max ${(maxHeap / 1048576).toFixed(1)} MiB, RSS growth max ${(maxRss / 1048576).toFixed(1)} MiB`,
    );
  }, 120_000);

  test('CSV export stops reading when the consumer cancels', async () => {
    const reader = b.exportCsv('big', {}).getReader();
    await reader.read();
    await reader.cancel();
    // The database is free for the next statement (no transaction left open).
    expect((await b.select('items', { limit: 1 })).count).toBe(1);
  });

  test('an export holding a cursor (no primary key, external) is stopped when left unread; keyset exports hold nothing', async () => {
    const reader = b.exportCsv('nokey', {}).getReader();
    expect((await reader.read()).done).toBe(false);
    await Bun.sleep(1300); // db.transaction_idle_timeout_ms is 1000 here
    if (engine === 'external') {
      expect((await appError(reader.read())).code).toBe('export_abandoned');
      const r = await p.db.query<{ n: number }>(
        `SELECT count(*)::int4 AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
      );
      expect(r.rows[0]!.n).toBe(0);
    } else {
      expect(
        (
          await new Response(
            new ReadableStream({
              pull: async (c) => {
                const x = await reader.read();
                x.done ? c.close() : c.enqueue(x.value);
              },
            }),
          ).text()
        ).split('\r\n').length,
      ).toBeGreaterThan(1000);
    }
    const slow = b.exportCsv('mixed', {}).getReader();
    await slow.read();
    await Bun.sleep(1300);
    expect((await slow.read()).done).toBe(false);
    await slow.cancel();
  });

  test('writes outside a transaction (the database itself) work too; an import then opens its own', async () => {
    const row = await b.insert(p.db, 'nokey', { a: -2, b: 'direct' });
    expect(row).toEqual({ a: -2, b: 'direct' });
    expect((await appError(b.importCsv(p.db, 'nokey', 'a,b\n-3,x\nbad,y\n'))).message).toStartWith('Line 3');
    expect((await b.select('nokey', { filters: [{ field: 'a', op: 'eq', value: -3 }] })).count).toBe(0);
    expect(await b.importCsv(p.db, 'nokey', 'a,b\n-3,x\n')).toEqual({ inserted: 1 });
  });

  test('CSV import: RFC 4180 quoting, CRLF, empty cell → NULL or default, all rows in the transaction', async () => {
    const csv =
      'name,qty,price,category,active,meta,tags,blob\r\n' +
      '"kiwi, green",1,0.30,fruit,true,"{""a"":1}","[""x"",null]",AAE=\r\n' +
      '"line\r\nbreak",,,"",false,,,\r\n' +
      '\r\n' +
      'plum,2,,,,null,[],\n';
    expect(await tx((q) => b.importCsv(q, 'items', csv))).toEqual({ inserted: 3 });
    const r = await b.select('items', {
      filters: [{ field: 'name', op: 'in', value: ['kiwi, green', 'line\r\nbreak', 'plum'] }],
    });
    expect(
      r.rows.map(({ name, qty, price, category, active, meta, tags, blob }) => ({
        name,
        qty,
        price,
        category,
        active,
        meta,
        tags,
        blob,
      })),
    ).toEqual([
      {
        name: 'kiwi, green',
        qty: 1,
        price: '0.30',
        category: 'fruit',
        active: true,
        meta: { a: 1 },
        tags: ['x', null],
        blob: 'AAE=',
      },
      {
        name: 'line\r\nbreak',
        qty: null,
        price: null,
        category: '',
        active: false,
        meta: null,
        tags: null,
        blob: null,
      },
      { name: 'plum', qty: 2, price: null, category: null, active: true, meta: null, tags: [], blob: null },
    ]);
  });

  test.each([
    ['a value the column cannot hold', 'name,qty\nok1,1\nok2,2\nbad,abc\n', 4, 'qty', 400, 'items'],
    [
      'a bad date found by the database',
      'name,day\nok1,2024-01-01\n"multi\nline",2024-13-45\n',
      3,
      'day',
      400,
      'items',
    ],
    ['a unique violation', 'name,qty\nnew1,1\napple,2\n', 3, undefined, 409, 'items'],
    ['a check violation', 'name,qty\nnew1,1\nnew2,-5\n', 3, 'qty', 400, 'items'],
    ['NOT NULL without default left empty', 'id,n,payload\n-1,1,x\n-2,,y\n', 3, 'n', 400, 'big'],
    ['an unknown column in the header', 'name,nope\nx,1\n', 1, 'nope', 400, 'items'],
    ['a row with too many cells', 'name,qty\nx,1\ny,2,3\n', 3, undefined, 400, 'items'],
    ['an unclosed quote', 'name,qty\nx,1\n"y,2\n', 3, undefined, 400, 'items'],
  ])('CSV import refuses %s, naming the line; nothing is inserted', async (_n, csv, line, column, status, table) => {
    const count = async () =>
      (await p.db.query<{ c: number }>(`SELECT count(*)::int4 AS c FROM public.${table}`)).rows[0]!.c;
    const before = await count();
    const e = await appError(tx((q) => b.importCsv(q, table, csv)));
    expect(e.status).toBe(status);
    expect(e.message).toStartWith(`Line ${line}`);
    expect((e.extra.details as any).line).toBe(line);
    if (column) expect((e.extra.details as any).column).toBe(column);
    expect(e.message).not.toMatch(/INSERT|violates|syntax/i);
    expect(await count()).toBe(before);
  });
});
