import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { canSql, startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { expectError, ITEMS, query, TABLE_MIGRATIONS } from './fixtures';
import { expectA } from '../helpers/envelopes';

describe.each(ENGINES)('Database API queries on %s', (engine) => {
  let s: TestServer;
  let key: string;
  const q = (body: unknown) => query(s, key, body);
  const names = (r: { body: any }) => r.body.data.rows.map((x: any) => x.name);

  beforeAll(async () => {
    s = await startServer(engine, { migrations: TABLE_MIGRATIONS });
    key = await createKey(s, {
      type: 'service',
      service: 'shop',
      permissions: ['db:query'],
      tables: ['items', 'orders', 'many', 'slow'],
    });
    const r = await q({ entity: 'items', action: 'insert', data: ITEMS });
    expect(r.status).toBe(200);
    await q({ entity: 'many', action: 'insert', data: Array.from({ length: 150 }, (_, i) => ({ n: i + 1 })) });
  });
  afterAll(() => s.stop());

  const sel = (filters: unknown[], extra: Record<string, unknown> = {}) => ({
    entity: 'items',
    action: 'select',
    filters,
    sort: [{ field: 'id', direction: 'asc' }],
    ...extra,
  });

  test.each([
    ['eq', [{ field: 'category', op: 'eq', value: 'veg' }], ['Carrot', 'eggplant']],
    ['neq (NULL never matches)', [{ field: 'category', op: 'neq', value: 'veg' }], ['apple', 'banana']],
    ['gt', [{ field: 'qty', op: 'gt', value: 5 }], ['Carrot', 'eggplant']],
    ['gte', [{ field: 'qty', op: 'gte', value: 5 }], ['apple', 'Carrot', 'eggplant']],
    ['lt on numeric with a string value', [{ field: 'price', op: 'lt', value: '0.80' }], ['banana']],
    ['lte on numeric with a number value', [{ field: 'price', op: 'lte', value: 0.8 }], ['banana', 'Carrot']],
    ['in', [{ field: 'name', op: 'in', value: ['apple', 'date', 'nope'] }], ['apple', 'date']],
    ['not_in', [{ field: 'qty', op: 'not_in', value: [0, 5] }], ['Carrot', 'eggplant']],
    [
      'like (case-sensitive)',
      [{ field: 'name', op: 'like', value: '%a%' }],
      ['apple', 'banana', 'Carrot', 'date', 'eggplant'],
    ],
    ['like with prefix', [{ field: 'name', op: 'like', value: 'c%' }], []],
    ['ilike', [{ field: 'name', op: 'ilike', value: 'c%' }], ['Carrot']],
    ['is_null true', [{ field: 'qty', op: 'is_null', value: true }], ['date']],
    ['is_null false', [{ field: 'price', op: 'is_null', value: false }], ['apple', 'banana', 'Carrot', 'date']],
    ['eq on boolean', [{ field: 'active', op: 'eq', value: false }], ['Carrot']],
    [
      'several filters are ANDed',
      [
        { field: 'category', op: 'eq', value: 'fruit' },
        { field: 'qty', op: 'gt', value: 0 },
      ],
      ['apple'],
    ],
  ])('operator %s', async (_name, filters, expected) => {
    const r = await q(sel(filters));
    expect(r.status).toBe(200);
    expect(names(r)).toEqual(expected);
    expect(r.body.data.count).toBe(expected.length);
  });

  test.each([
    ['asc', [{ field: 'qty', direction: 'asc' }, { field: 'name' }], ['banana', 'apple', 'eggplant', 'Carrot', 'date']],
    ['DESC (any case)', [{ field: 'name', direction: 'DESC' }], ['eggplant', 'date', 'banana', 'apple', 'Carrot']],
    [
      'Desc then asc',
      [
        { field: 'category', direction: 'Desc' },
        { field: 'name', direction: 'asc' },
      ],
      ['date', 'Carrot', 'eggplant', 'apple', 'banana'],
    ],
  ])('sort %s', async (_n, sort, expected) => {
    const r = await q({ entity: 'items', action: 'select', sort });
    expect(r.status).toBe(200);
    expect(names(r)).toEqual(expected);
  });

  test('fields narrow the rows; limit, offset and total', async () => {
    const r = await q({
      entity: 'items',
      action: 'select',
      fields: ['name', 'qty'],
      sort: [{ field: 'id' }],
      limit: 2,
      offset: 1,
      total: true,
    });
    expectA(r, 200, {
      rows: [
        { name: 'banana', qty: 0 },
        { name: 'Carrot', qty: 12 },
      ],
      count: 2,
      total: 5,
    });
    const past = await q({
      entity: 'items',
      action: 'select',
      filters: [{ field: 'category', op: 'eq', value: 'veg' }],
      offset: 10,
      total: true,
    });
    expect(past.body.data).toEqual({ rows: [], count: 0, total: 2 });
  });

  test('limit defaults to 100 and may not exceed db.max_limit', async () => {
    const r = await q({ entity: 'many', action: 'select' });
    expect(r.body.data.count).toBe(100);
    expect((await q({ entity: 'many', action: 'select', limit: 1000 })).body.data.count).toBe(150);
    expectError(await q({ entity: 'many', action: 'select', limit: 1001 }), 400, 'validation_error');
    await s.settings.set('db.max_limit', 20);
    const over = await q({ entity: 'many', action: 'select', limit: 21 });
    expectError(over, 400, 'validation_error');
    expect(over.body.error.details.fields).toHaveProperty('limit');
    expect((await q({ entity: 'many', action: 'select', limit: 20 })).body.data.count).toBe(20);
    await s.settings.set('db.max_limit', 1000);
  });

  test('insert one row and several rows in one statement; RETURNING narrowed by fields', async () => {
    const one = await q({
      entity: 'items',
      action: 'insert',
      data: { name: 'fig', qty: 3 },
      fields: ['name', 'qty', 'active'],
    });
    expectA(one, 200, { rows: [{ name: 'fig', qty: 3, active: true }], count: 1 });
    const bulk = await q({
      entity: 'items',
      action: 'insert',
      data: [
        { name: 'grape', price: '2.00' },
        { name: 'kiwi', qty: 1 },
      ],
      fields: ['name', 'qty', 'price'],
    });
    expect(bulk.body.data).toEqual({
      rows: [
        { name: 'grape', qty: null, price: '2.00' },
        { name: 'kiwi', qty: 1, price: null },
      ],
      count: 2,
    });
    const all = await q({ entity: 'items', action: 'insert', data: { name: 'lime' } });
    expect(Object.keys(all.body.data.rows[0]).sort()).toEqual([
      'active',
      'category',
      'created_at',
      'id',
      'name',
      'price',
      'qty',
    ]);
  });

  test('update and delete answer the affected rows', async () => {
    const up = await q({
      entity: 'items',
      action: 'update',
      data: { qty: 9 },
      filters: [{ field: 'name', op: 'in', value: ['fig', 'kiwi'] }],
      fields: ['name', 'qty'],
    });
    expect(up.status).toBe(200);
    expect(up.body.data.count).toBe(2);
    expect(up.body.data.rows.map((r: any) => r.qty)).toEqual([9, 9]);
    const none = await q({
      entity: 'items',
      action: 'update',
      data: { qty: 1 },
      filters: [{ field: 'name', op: 'eq', value: 'nothing' }],
    });
    expect(none.body.data).toEqual({ rows: [], count: 0 });
    const del = await q({
      entity: 'items',
      action: 'delete',
      filters: [{ field: 'name', op: 'in', value: ['fig', 'grape', 'kiwi', 'lime'] }],
      fields: ['name'],
    });
    expect(del.body.data.count).toBe(4);
    expect(del.body.data.rows.map((r: any) => r.name).sort()).toEqual(['fig', 'grape', 'kiwi', 'lime']);
    expect((await q({ entity: 'items', action: 'select', total: true, limit: 0 })).body.data.total).toBe(5);
  });

  // Each: request body → status, code, and the request path the error names (details.fields key or details.column).
  test.each([
    ['update without filters', { entity: 'items', action: 'update', data: { qty: 1 } }, 400, 'filters_required', null],
    [
      'update with empty filters',
      { entity: 'items', action: 'update', data: { qty: 1 }, filters: [] },
      400,
      'filters_required',
      null,
    ],
    ['delete without filters', { entity: 'items', action: 'delete' }, 400, 'filters_required', null],
    ['unknown action', { entity: 'items', action: 'truncate' }, 400, 'validation_error', 'action'],
    ['unknown top-level field', { entity: 'items', action: 'select', where: 'x' }, 400, 'validation_error', 'where'],
    [
      'unknown key in a filter',
      { entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'eq', value: 1, or: true }] },
      400,
      'validation_error',
      'filters[0].or',
    ],
    [
      'unknown key in a sort item',
      { entity: 'items', action: 'select', sort: [{ field: 'qty', nulls: 'first' }] },
      400,
      'validation_error',
      'sort[0].nulls',
    ],
    [
      'unknown field in fields',
      { entity: 'items', action: 'select', fields: ['id', 'nope'] },
      400,
      'validation_error',
      'fields[1]',
    ],
    [
      'unknown filter field',
      { entity: 'items', action: 'select', filters: [{ field: 'nope', op: 'eq', value: 1 }] },
      400,
      'validation_error',
      'filters[0].field',
    ],
    [
      'unknown operator',
      { entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'between', value: 1 }] },
      400,
      'validation_error',
      'filters[0].op',
    ],
    [
      'unknown sort field',
      { entity: 'items', action: 'select', sort: [{ field: 'nope' }] },
      400,
      'validation_error',
      'sort[0].field',
    ],
    [
      'unknown direction',
      { entity: 'items', action: 'select', sort: [{ field: 'qty', direction: 'up' }] },
      400,
      'validation_error',
      'sort[0].direction',
    ],
    [
      'unknown data key',
      { entity: 'items', action: 'insert', data: { name: 'x', nope: 1 } },
      400,
      'validation_error',
      'data.nope',
    ],
    [
      'in with an empty array',
      { entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'in', value: [] }] },
      400,
      'validation_error',
      'filters[0].value',
    ],
    [
      'not_in with a scalar',
      { entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'not_in', value: 1 }] },
      400,
      'validation_error',
      'filters[0].value',
    ],
    [
      'is_null with a string',
      { entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'is_null', value: 'yes' }] },
      400,
      'validation_error',
      'filters[0].value',
    ],
    [
      'eq with null',
      { entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'eq', value: null }] },
      400,
      'validation_error',
      'filters[0].value',
    ],
    [
      'like on an integer column',
      { entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'like', value: '1%' }] },
      400,
      'validation_error',
      'filters[0].op',
    ],
    ['negative offset', { entity: 'items', action: 'select', offset: -1 }, 400, 'validation_error', 'offset'],
    ['fractional limit', { entity: 'items', action: 'select', limit: 1.5 }, 400, 'validation_error', 'limit'],
    ['limit as a string', { entity: 'items', action: 'select', limit: '5' }, 400, 'validation_error', 'limit'],
    ['offset as a string', { entity: 'items', action: 'select', offset: '0' }, 400, 'validation_error', 'offset'],
    ['empty fields', { entity: 'items', action: 'select', fields: [] }, 400, 'validation_error', 'fields'],
    ['insert without data', { entity: 'items', action: 'insert' }, 400, 'validation_error', 'data'],
    ['insert with an empty array', { entity: 'items', action: 'insert', data: [] }, 400, 'validation_error', 'data'],
    [
      'update with an array',
      { entity: 'items', action: 'update', data: [{ qty: 1 }], filters: [{ field: 'id', op: 'eq', value: 1 }] },
      400,
      'validation_error',
      'data',
    ],
    ['data on select', { entity: 'items', action: 'select', data: { qty: 1 } }, 400, 'validation_error', 'data'],
    [
      'limit on delete',
      { entity: 'items', action: 'delete', filters: [{ field: 'id', op: 'eq', value: 1 }], limit: 1 },
      400,
      'validation_error',
      'limit',
    ],
    ['entity of the wrong type', { entity: 5, action: 'select' }, 400, 'validation_error', 'entity'],
    ['unique violation', { entity: 'items', action: 'insert', data: { name: 'apple' } }, 409, 'conflict', null],
    [
      'foreign key violation',
      { entity: 'orders', action: 'insert', data: { item_id: 999 } },
      400,
      'validation_error',
      'item_id',
    ],
    [
      'not null violation',
      { entity: 'orders', action: 'insert', data: { note: 'x' } },
      400,
      'validation_error',
      'item_id',
    ],
    [
      'check violation',
      { entity: 'items', action: 'insert', data: { name: 'neg', qty: -1 } },
      400,
      'validation_error',
      'qty',
    ],
    [
      'text for an integer',
      { entity: 'items', action: 'insert', data: { name: 'x1', qty: 'many' } },
      400,
      'validation_error',
      'qty',
    ],
    [
      'integer out of range',
      { entity: 'items', action: 'insert', data: { name: 'x2', qty: 99999999999 } },
      400,
      'validation_error',
      'qty',
    ],
    [
      'bad uuid',
      { entity: 'orders', action: 'insert', data: { item_id: 1, ref: 'not-a-uuid' } },
      400,
      'validation_error',
      'ref',
    ],
    [
      'bad timestamp',
      { entity: 'items', action: 'insert', data: { name: 'x3', created_at: 'yesterday-ish' } },
      400,
      'validation_error',
      'created_at',
    ],
    [
      'varchar too long',
      { entity: 'items', action: 'insert', data: { name: 'x4', category: 'much-too-long-category' } },
      400,
      'validation_error',
      'category',
    ],
    [
      'numeric too large for numeric(10,2)',
      { entity: 'items', action: 'insert', data: { name: 'x5', price: '123456789012.5' } },
      400,
      'validation_error',
      'price',
    ],
    [
      'object for a text column',
      { entity: 'items', action: 'insert', data: { name: { a: 1 } } },
      400,
      'validation_error',
      'name',
    ],
    [
      'bad value in an in-list',
      { entity: 'items', action: 'select', filters: [{ field: 'qty', op: 'in', value: [1, 'x'] }] },
      400,
      'validation_error',
      'qty',
    ],
    ['unknown entity in the whitelist', { entity: 'slow', action: 'select' }, 400, 'validation_error', 'entity'],
    ['raw SQL field', { query: 'SELECT 1' }, 403, 'raw_sql_disabled', null],
    [
      'raw SQL beside a valid query',
      { entity: 'items', action: 'select', query: 'DROP TABLE items' },
      403,
      'raw_sql_disabled',
      null,
    ],
    [
      'raw SQL inside a filter',
      { entity: 'items', action: 'select', filters: [{ field: 'id', op: 'eq', value: 1, query: 'x' }] },
      403,
      'raw_sql_disabled',
      null,
    ],
    [
      'raw SQL inside a sort item',
      { entity: 'items', action: 'select', sort: [{ field: 'id', query: 'DROP TABLE items' }] },
      403,
      'raw_sql_disabled',
      null,
    ],
    [
      'raw SQL inside a later sort item',
      { entity: 'items', action: 'select', sort: [{ field: 'id' }, { query: 'x' }] },
      403,
      'raw_sql_disabled',
      null,
    ],
  ])('%s → error', async (_name, body, status, code, field) => {
    const r = await q(body);
    expectError(r, status as number, code as string);
    if (field) {
      const d = r.body.error.details ?? {};
      expect([d.column, ...Object.keys(d.fields ?? {})]).toContain(field);
    }
  });

  test('deleting a row other rows still reference → 400 naming the column, row kept', async () => {
    const item = (await q({ entity: 'items', action: 'insert', data: { name: 'referenced' }, fields: ['id'] })).body
      .data.rows[0].id;
    expect((await q({ entity: 'orders', action: 'insert', data: { item_id: item } })).status).toBe(200);
    const r = await q({ entity: 'items', action: 'delete', filters: [{ field: 'id', op: 'eq', value: item }] });
    expectError(r, 400, 'validation_error');
    expect(r.body.error.details.column).toBe('id');
    expect(r.body.error.message).toBe(
      "Column 'id': the row is still referenced by rows of another table; remove or change those first",
    );
    // Neither the other table nor the constraint is named: the key may not be allowed to know them.
    expect(r.text).not.toMatch(/orders|fkey/);
    expect(
      (await q({ entity: 'items', action: 'select', filters: [{ field: 'id', op: 'eq', value: item }] })).body.data
        .count,
    ).toBe(1);
    // Changing the referenced key is refused the same way.
    const u = await q({
      entity: 'items',
      action: 'update',
      data: { id: 999_999 },
      filters: [{ field: 'id', op: 'eq', value: item }],
    });
    expectError(u, 400, 'validation_error');
    expect(u.body.error.details.column).toBe('id');
    await q({ entity: 'orders', action: 'delete', filters: [{ field: 'item_id', op: 'eq', value: item }] });
    expect(
      (await q({ entity: 'items', action: 'delete', filters: [{ field: 'id', op: 'eq', value: item }] })).body.data
        .count,
    ).toBe(1);
  });

  test('a failed bulk insert writes nothing', async () => {
    const r = await q({ entity: 'items', action: 'insert', data: [{ name: 'ok-1' }, { name: 'apple' }] });
    expectError(r, 409, 'conflict');
    expect(r.body.error.details).toEqual({ columns: ['name'] });
    expect(
      (await q({ entity: 'items', action: 'select', filters: [{ field: 'name', op: 'eq', value: 'ok-1' }] })).body.data
        .count,
    ).toBe(0);
  });

  // A view and a column made with SQL beside the running server (as an operator's psql would).
  test.if(canSql(engine))('a view that cannot be written → 400, not a server error', async () => {
    await s.sql('CREATE VIEW public.item_totals AS SELECT category, count(*) AS n FROM public.items GROUP BY category');
    const k = await createKey(s, {
      type: 'service',
      service: 'shop',
      permissions: ['db:query'],
      tables: ['item_totals'],
    });
    await Bun.sleep(250);
    const sel = await query(s, k, {
      entity: 'item_totals',
      action: 'select',
      filters: [{ field: 'category', op: 'eq', value: 'veg' }],
    });
    expect(sel.body.data.rows).toEqual([{ category: 'veg', n: '2' }]);
    expectError(
      await query(s, k, { entity: 'item_totals', action: 'insert', data: { category: 'x' } }),
      400,
      'validation_error',
    );
  });

  // One path for every request of the route (src/modules/database/routes.ts): the listener's
  // headers, the envelope, and each check's answer in the route's order.
  test("a key's select: request id, headers, envelope, and each check's answer in order", async () => {
    const ok = await s.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': key, 'x-request-id': 'direct-1' },
      body: sel([{ field: 'name', op: 'eq', value: 'apple' }], { fields: ['name'] }),
    });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ success: true, data: { rows: [{ name: 'apple' }], count: 1 } });
    expect(ok.headers.get('x-request-id')).toBe('direct-1');
    expect(ok.headers.get('x-content-type-options')).toBe('nosniff');
    expect(ok.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(ok.headers.get('content-type')).toContain('application/json');
    // The same checks, in the route's order, answer as before.
    expectError(await q({ ...sel([]), stray: 1 }), 400, 'validation_error');
    expectError(await q({ ...sel([]), limit: -1 }), 400, 'validation_error');
    expectError(await q({ ...sel([]), query: 'SELECT 1' }), 403, 'raw_sql_disabled');
    expectError(await q({ ...sel([]), entity: 'secrets' }), 403, 'forbidden');
    expectError(await q({ ...sel([]), filters: [{ field: 'nope', op: 'eq', value: 1 }] }), 400, 'validation_error');
    expectError(await query(s, 'sk_' + 'x'.repeat(40), sel([])), 401, 'unauthorized');
  });

  test.if(canSql(engine))('a column added after start is known without a restart', async () => {
    await s.sql('ALTER TABLE public.many ADD COLUMN label text');
    await Bun.sleep(250); // a name the cached catalog misses reloads it unless it was reloaded in the last 200 ms
    const r = await q({
      entity: 'many',
      action: 'update',
      data: { label: 'first' },
      filters: [{ field: 'n', op: 'eq', value: 1 }],
    });
    expect(r.status).toBe(200);
    expect(r.body.data.rows).toEqual([{ n: 1, label: 'first' }]);
    await s.sql('ALTER TABLE public.many DROP COLUMN label');
    const gone = await q({ entity: 'many', action: 'select', fields: ['label'] });
    expectError(gone, 400, 'validation_error');
  });

  test.if(engine === 'external')('a statement running past db.statement_timeout_ms → 503 query_timeout', async () => {
    await s.sql('CREATE VIEW public.slow AS SELECT 1 AS x FROM pg_sleep(2)');
    await s.settings.set('db.statement_timeout_ms', 200);
    await Bun.sleep(250);
    const started = performance.now();
    const r = await q({ entity: 'slow', action: 'select' });
    expectError(r, 503, 'query_timeout');
    expect(performance.now() - started).toBeLessThan(1500);
    await s.settings.set('db.statement_timeout_ms', 5000);
  });
});
