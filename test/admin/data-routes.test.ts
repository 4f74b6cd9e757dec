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
