import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey, listKeys, revokeKey } from '../helpers/keys';
import { expectError, expectNoInternals, ITEMS, query, TABLE_MIGRATIONS } from './fixtures';

const SELECT = { entity: 'items', action: 'select', fields: ['name'], limit: 1 };

// Strings an attacker would try at every identifier position.
const HOSTILE = [
  'items; DROP TABLE items; --',
  'name" FROM items; DROP TABLE items; --',
  'items"--',
  "name') OR 1=1 --",
  'basalt.api_keys',
  'pg_catalog.pg_tables',
  '../items',
  'name\u0000',
  'NAME',
];

describe.each(ENGINES)('Database API security on %s', (engine) => {
  let s: TestServer;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    s = await startServer(engine, { migrations: TABLE_MIGRATIONS });
    keys.service = await createKey(s, {
      type: 'service',
      service: 'shop',
      permissions: ['db:query'],
      tables: ['items', 'orders', 'api_keys'],
    });
    keys.star = await createKey(s, { type: 'service', service: 'shop', permissions: ['db:*'], tables: ['items'] });
    keys.ordersOnly = await createKey(s, {
      type: 'service',
      service: 'shop',
      permissions: ['db:query'],
      tables: ['orders'],
    });
    keys.mailOnly = await createKey(s, { type: 'service', service: 'mailer', permissions: ['mail:send'] });
    keys.public = await createKey(s, { type: 'public' });
    keys.revoked = await createKey(s, {
      type: 'service',
      service: 'shop',
      permissions: ['db:query'],
      tables: ['items'],
    });
    await revokeKey(s, keys.revoked);
    expect((await query(s, keys.service, { entity: 'items', action: 'insert', data: ITEMS })).status).toBe(200);
  });
  afterAll(() => s.stop());

  describe.each(['open', 'api_key_required'] as const)('access mode %s', (mode) => {
    beforeAll(() => s.settings.set('web.public_api_access_mode', mode));
    // docs/api-keys.md: /api/v1/db is a public prefix; in api_key_required mode a missing key says so.
    const noKey = mode === 'api_key_required' ? 'api_key_required' : 'unauthorized';

    test.each([
      ['service key with db:query', 'service', SELECT, 200, null],
      ['service key with db:*', 'star', SELECT, 200, null],
      ['no key', undefined, SELECT, 401, noKey],
      ['empty key', '', SELECT, 401, noKey],
      ['unknown key', 'sk_notarealkey', SELECT, 401, 'unauthorized'],
      ['revoked key', 'revoked', SELECT, 401, 'unauthorized'],
      ['public key (no db permission)', 'public', SELECT, 403, 'forbidden'],
      ['service key without a db permission', 'mailOnly', SELECT, 403, 'forbidden'],
      ['entity outside the whitelist', 'ordersOnly', SELECT, 403, 'forbidden'],
      [
        'a table that does not exist, outside the whitelist → 403, not 400',
        'ordersOnly',
        { entity: 'no_such_table', action: 'select' },
        403,
        'forbidden',
      ],
      [
        'a platform table, outside the whitelist',
        'star',
        { entity: 'basalt.api_keys', action: 'select' },
        403,
        'forbidden',
      ],
      [
        'a platform table name in the whitelist is still not reachable',
        'service',
        { entity: 'api_keys', action: 'select' },
        400,
        'validation_error',
      ],
      [
        'whitelist is checked before the body shape',
        'ordersOnly',
        { entity: 'items', action: 'select', bogus: 1 },
        403,
        'forbidden',
      ],
      // A caller without a key learns nothing about its body: not raw SQL, not its shape.
      ['no key, raw SQL: the key is checked first', undefined, { query: 'SELECT * FROM basalt.api_keys' }, 401, noKey],
      [
        'no key, malformed body: the key is checked first',
        undefined,
        { entity: 7, action: 'explode', bogus: true },
        401,
        noKey,
      ],
      ['no key, body not an object', undefined, [1, 2], 401, noKey],
      ['unknown key, raw SQL', 'sk_notarealkey', { query: 'SELECT 1' }, 401, 'unauthorized'],
      ['unknown key, malformed body', 'sk_notarealkey', { entity: 7 }, 401, 'unauthorized'],
      // An active key learns why raw SQL is refused, even without the db permission.
      ['public key, raw SQL', 'public', { query: 'SELECT 1' }, 403, 'raw_sql_disabled'],
      ['service key, raw SQL', 'service', { query: 'SELECT * FROM basalt.api_keys' }, 403, 'raw_sql_disabled'],
    ])('%s', async (_name, who, body, status, code) => {
      const key = who === undefined ? undefined : (keys[who] ?? who);
      const r =
        key === ''
          ? await s.req('POST', '/api/v1/db/query', { headers: { 'x-api-key': '' }, body })
          : await query(s, key, body);
      if (code) expectError(r, status as number, code);
      else expect(r.status).toBe(status as number);
    });

    test('transactions need the permission too', async () => {
      expectError(await s.req('POST', '/api/v1/db/transaction/begin', { body: {} }), 401, noKey);
      expectError(
        await s.req('POST', '/api/v1/db/transaction/00000000-0000-0000-0000-000000000000/commit', { body: {} }),
        401,
        noKey,
      );
      expectError(await s.req('POST', '/api/v1/db/transaction/not-an-id/rollback', { body: { x: 1 } }), 401, noKey);
      expectError(
        await s.req('POST', '/api/v1/db/transaction/begin', { headers: { 'x-api-key': 'sk_notarealkey' }, body: {} }),
        401,
        'unauthorized',
      );
      expectError(
        await s.req('POST', '/api/v1/db/transaction/begin', { headers: { 'x-api-key': keys.public! }, body: {} }),
        403,
        'forbidden',
      );
    });
  });

  const positions: [string, (h: string) => unknown][] = [
    ['entity', (h) => ({ entity: h, action: 'select' })],
    ['fields', (h) => ({ entity: 'items', action: 'select', fields: [h] })],
    ['filter field', (h) => ({ entity: 'items', action: 'select', filters: [{ field: h, op: 'eq', value: 1 }] })],
    ['operator', (h) => ({ entity: 'items', action: 'select', filters: [{ field: 'name', op: h, value: 1 }] })],
    ['sort field', (h) => ({ entity: 'items', action: 'select', sort: [{ field: h }] })],
    ['direction', (h) => ({ entity: 'items', action: 'select', sort: [{ field: 'name', direction: h }] })],
    ['data key (insert)', (h) => ({ entity: 'items', action: 'insert', data: { name: 'x', [h]: 1 } })],
    [
      'data key (update)',
      (h) => ({ entity: 'items', action: 'update', data: { [h]: 1 }, filters: [{ field: 'id', op: 'eq', value: 1 }] }),
    ],
    ['action', (h) => ({ entity: 'items', action: h })],
  ];

  test.each(positions)('hostile identifiers as %s → 400 or 403, never executed', async (_pos, build) => {
    for (const h of HOSTILE) {
      const r = await query(s, keys.service, build(h));
      expect([400, 403]).toContain(r.status);
      expect(r.body.success).toBe(false);
      // The message may quote the client's own string back; nothing else may look like SQL or internals.
      expectNoInternals(r.text.split(JSON.stringify(h).slice(1, -1)).join('<input>'));
    }
    await s.settings.set('web.public_api_access_mode', 'open');
    const all = await query(s, keys.service, { entity: 'items', action: 'select', total: true, limit: 0 });
    expect(all.body.data.total).toBe(ITEMS.length);
    expect(await listKeys(s)).toHaveLength(6); // the platform's key table is still whole
  });

  test.each([
    ["'; DROP TABLE items; --"],
    ['1 OR 1=1'],
    ["x') UNION SELECT key_hash FROM basalt.api_keys --"],
    ['$1'],
    ['\\'],
  ])('hostile value %p is data: stored and found as written, matches nothing else', async (value) => {
    const name = `v:${value}`;
    const ins = await query(s, keys.service, {
      entity: 'items',
      action: 'insert',
      data: { name, category: 'x' },
      fields: ['name'],
    });
    expect(ins.body.data.rows).toEqual([{ name }]);
    const eq = await query(s, keys.service, {
      entity: 'items',
      action: 'select',
      fields: ['name'],
      filters: [{ field: 'name', op: 'eq', value: name }],
    });
    expect(eq.body.data.rows).toEqual([{ name }]);
    const like = await query(s, keys.service, {
      entity: 'items',
      action: 'select',
      fields: ['name'],
      filters: [{ field: 'name', op: 'like', value }],
    });
    expect(like.body.data.count).toBe(0);
    const asInt = await query(s, keys.service, {
      entity: 'items',
      action: 'select',
      filters: [{ field: 'qty', op: 'eq', value }],
    });
    expectError(asInt, 400, 'validation_error');
    // Inside an `in` / `not_in` list (one array parameter): matched as written, never as SQL or array syntax.
    const inList = await query(s, keys.service, {
      entity: 'items',
      action: 'select',
      fields: ['name'],
      filters: [{ field: 'name', op: 'in', value: ['apple', name, `${value}"}`, '{x,y}'] }],
      sort: [{ field: 'name' }],
    });
    expect(inList.body.data.rows).toEqual([{ name: 'apple' }, { name }].sort((a, b) => (a.name < b.name ? -1 : 1)));
    const notIn = await query(s, keys.service, {
      entity: 'items',
      action: 'select',
      total: true,
      limit: 0,
      filters: [{ field: 'name', op: 'not_in', value: [name, value] }],
    });
    expect(notIn.body.data.total).toBe(ITEMS.length);
    const del = await query(s, keys.service, {
      entity: 'items',
      action: 'delete',
      filters: [{ field: 'name', op: 'eq', value: name }],
    });
    expect(del.body.data.count).toBe(1);
    expect(
      (await query(s, keys.service, { entity: 'items', action: 'select', total: true, limit: 0 })).body.data.total,
    ).toBe(ITEMS.length);
  });
});
