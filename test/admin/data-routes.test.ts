/**
 * The data browser's HTTP routes (docs/admin-api.md §Data browser): each route's answer
 * and status; the service's own rules are tested beside it (data-browser*.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { startAdminServer } from './support';
import { expectAError } from '../helpers/envelopes';

describe.each(ENGINES)('admin data routes on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basalt-admin-data-'));
    writeFileSync(
      join(dir, '001.sql'),
      `CREATE TABLE items (id integer PRIMARY KEY, name text NOT NULL, price numeric(10,2));
      INSERT INTO items SELECT g, 'item ' || g, g * 1.5 FROM generate_series(1, 30) g;
      CREATE TABLE item_notes (id serial PRIMARY KEY, item_id integer REFERENCES items (id), note text);`,
    );
    s = await startAdminServer(engine, { env: { BASALT_MIGRATIONS_DIR: dir } });
    a = await signInAdmin(s);
  }, 60_000);
  afterAll(() => s.stop());

  test('tables: columns, primary key, the exact count of a small table', async () => {
    const r = await adminReq(s, a, 'GET', '/api/admin/data/tables');
    expect(r.body.data.tables).toContainEqual(
      expect.objectContaining({
        name: 'items',
        primary_key: ['id'],
        rows: 30,
        estimated_rows: 30,
        columns: expect.arrayContaining([expect.objectContaining({ name: 'price', nullable: true, references: null })]),
      }),
    );
    // A foreign key names the table and column it references (the panel offers their values).
    const notes = r.body.data.tables.find((t: any) => t.name === 'item_notes');
    expect(notes.columns.find((c: any) => c.name === 'item_id').references).toEqual({ table: 'items', column: 'id' });
    expect(notes.rows).toBe(0);
  });

  test('select with the Database API operators, sort and paging', async () => {
    const r = await adminReq(s, a, 'POST', '/api/admin/data/items/select', {
      filters: [{ field: 'id', op: 'gt', value: 25 }],
      sort: [{ field: 'id', direction: 'desc' }],
      limit: 2,
    });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({
      rows: [{ id: 30, name: 'item 30', price: '45.00' }, { id: 29 }],
      count: 2,
      total: 5,
    });
  });

  test("relations: named as expand names them; a row's related rows and children in one select", async () => {
    const tables = (await adminReq(s, a, 'GET', '/api/admin/data/tables')).body.data.tables;
    const byName = (n: string) => tables.find((t: any) => t.name === n);
    expect(byName('items').relations).toEqual([
      {
        name: 'item_notes_via_item_id',
        kind: 'one_to_many',
        table: 'item_notes',
        columns: ['id'],
        target_columns: ['item_id'],
      },
    ]);
    expect(byName('item_notes').relations).toEqual([
      { name: 'item_id', kind: 'many_to_one', table: 'items', columns: ['item_id'], target_columns: ['id'] },
    ]);
    for (const note of ['first', 'second'])
      expect(
        (await adminReq(s, a, 'POST', '/api/admin/data/item_notes/rows', { data: { item_id: 5, note } })).status,
      ).toBe(201);
    const item = await adminReq(s, a, 'POST', '/api/admin/data/items/select', {
      filters: [{ field: 'id', op: 'eq', value: 5 }],
      expand: { item_notes_via_item_id: { fields: ['note'], sort: [{ field: 'id', direction: 'desc' }], limit: 100 } },
    });
    expect(item.status).toBe(200);
    expect(item.body.data.rows).toEqual([
      {
        id: 5,
        name: 'item 5',
        price: '7.50',
        expand: { item_notes_via_item_id: [{ note: 'second' }, { note: 'first' }] },
      },
    ]);
    const notes = await adminReq(s, a, 'POST', '/api/admin/data/item_notes/select', {
      sort: [{ field: 'id' }],
      expand: { item_id: { fields: ['name', 'price'] } },
    });
    expect(notes.body.data.rows.map((r: any) => r.expand)).toEqual([
      { item_id: { name: 'item 5', price: '7.50' } },
      { item_id: { name: 'item 5', price: '7.50' } },
    ]);
    // What is no relation, or past a bound, is named as the Database API names it.
    const unknown = await adminReq(s, a, 'POST', '/api/admin/data/items/select', { expand: { nope: {} } });
    expectAError(unknown, 400, 'validation_error');
    expect(unknown.body.error.message).toBe(
      "expand.nope: 'nope' is no relation of entity 'items'; its relations: item_notes_via_item_id",
    );
    const big = await adminReq(s, a, 'POST', '/api/admin/data/items/select', {
      expand: { item_notes_via_item_id: { limit: 501 } },
    });
    expectAError(big, 400, 'validation_error');
    expect(big.body.error.message).toBe(
      "expand.item_notes_via_item_id.limit: must be at most 500 (the data browser's bound); page with offset",
    );
    // A select sorts by a path through a relation; the CSV export (keyset batches) refuses it by name.
    const byItem = await adminReq(s, a, 'POST', '/api/admin/data/item_notes/select', {
      sort: [{ field: 'item_id.name', direction: 'desc' }],
    });
    expect(byItem.body.data.count).toBe(2);
    const sort = encodeURIComponent('[{"field":"item_id.name"}]');
    const csv = await fetch(`${s.url}/api/admin/data/item_notes/export.csv?sort=${sort}`, { headers: a.headers() });
    expectAError({ status: csv.status, headers: csv.headers, body: await csv.json() }, 400, 'validation_error', {
      details: { fields: { 'sort[0].field': "the CSV export sorts by columns of 'item_notes' only, not by a path" } },
    });
  });

  test('insert 201, update, delete (all or nothing), with 404/400/409 in format A', async () => {
    expect(
      (await adminReq(s, a, 'POST', '/api/admin/data/items/rows', { data: { id: 100, name: 'new' } })).status,
    ).toBe(201);
    const up = await adminReq(s, a, 'PATCH', '/api/admin/data/items/rows', {
      key: { id: 100 },
      data: { name: 'renamed' },
    });
    expect(up.body.data.row).toMatchObject({ id: 100, name: 'renamed' });
    const del = await adminReq(s, a, 'POST', '/api/admin/data/items/delete', { keys: [{ id: 100 }, { id: 1 }] });
    expect(del.body.data).toEqual({ count: 2 });
    expect((await adminReq(s, a, 'POST', '/api/admin/data/items/delete', { keys: [] })).status).toBe(400);
    expectAError(await adminReq(s, a, 'POST', '/api/admin/data/nope/select', {}), 404, 'not_found');
    expect((await adminReq(s, a, 'POST', '/api/admin/data/items/rows', { data: { id: 2, name: 'dup' } })).status).toBe(
      409,
    );
  });

  test('CSV import: all rows or none', async () => {
    const ok = await adminReq(s, a, 'POST', '/api/admin/data/items/import', { csv: 'id,name\n200,a\n201,b\n' });
    expect(ok.body.data).toEqual({ inserted: 2 });
    const bad = await adminReq(s, a, 'POST', '/api/admin/data/items/import', { csv: 'id,name\n300,a\n301\n' });
    expect(bad.status).toBe(400);
    expect(
      (
        await adminReq(s, a, 'POST', '/api/admin/data/items/select', {
          filters: [{ field: 'id', op: 'eq', value: 300 }],
        })
      ).body.data.count,
    ).toBe(0);
  });

  test('CSV export: streamed text/csv of every matching row; a bad filter or table is a JSON error', async () => {
    const filters = encodeURIComponent(JSON.stringify([{ field: 'id', op: 'lte', value: 3 }]));
    const r = await fetch(
      `${s.url}/api/admin/data/items/export.csv?filters=${filters}&sort=${encodeURIComponent('[{"field":"id"}]')}`,
      { headers: a.headers() },
    );
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(r.headers.get('content-disposition')).toBe('attachment; filename="items.csv"');
    expect((await r.text()).trim().split(/\r?\n/)).toEqual(['id,name,price', '2,item 2,3.00', '3,item 3,4.50']);
    const bad = await fetch(`${s.url}/api/admin/data/items/export.csv?filters=not-json`, { headers: a.headers() });
    expectAError({ status: bad.status, headers: bad.headers, body: await bad.json() }, 400, 'validation_error', {
      details: { fields: { filters: expect.any(String) } },
    });
    const none = await fetch(`${s.url}/api/admin/data/nope/export.csv`, { headers: a.headers() });
    expect(none.status).toBe(404);
    expect((await fetch(`${s.url}/api/admin/data/items/export.csv`)).status).toBe(401);
  });
});
