/**
 * Bounds on the shape of JSON request bodies (docs/operations.md, Limits and bad input):
 * nesting deeper than web.max_json_depth (64) or an array/object past web.max_json_items
 * (10,000) is refused with 400 invalid_json in the area's envelope, on every route —
 * auth, Database API, mail, admin, extensions, unknown paths — before anything parses or
 * walks the body, in time linear in the body. And the Database API's smaller input
 * checks from the same probe: nested `in` lists, `__proto__` in insert data, the field a
 * bad like pattern is reported on.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { REPO_EXTENSIONS } from '../extensions/support';
import { jsonShapeProblem } from '../../src/http/json-bounds';

const nest = (depth: number, inner = '1') => '['.repeat(depth) + inner + ']'.repeat(depth);
const deepObject = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
const array = (n: number) => '[' + Array.from({ length: n }, (_, i) => i).join(',') + ']';
const object = (n: number) => '{' + Array.from({ length: n }, (_, i) => `"k${i}":1`).join(',') + '}';
/** A Database API select whose filter value is `value` (JSON text): the body itself nests 3 levels around it. */
const dbSelect = (value: string) =>
  `{"entity":"customers","action":"select","fields":["id"],"filters":[{"field":"meta","op":"eq","value":${value}}]}`;

describe('jsonShapeProblem (the scan)', () => {
  const B = { maxDepth: 4, maxItems: 3 };
  test.each([
    ['flat object', '{"a":1,"b":[1,2]}', null],
    ['exactly the depth', '[[[[1]]]]', null],
    ['one level deeper', '[[[[[1]]]]]', { kind: 'depth', limit: 4 }],
    ['objects count as levels', '{"a":{"b":{"c":{"d":{}}}}}', { kind: 'depth', limit: 4 }],
    ['exactly the items', '[1,2,3]', null],
    ['one item more', '[1,2,3,4]', { kind: 'items', limit: 3 }],
    ['members of an object', '{"a":1,"b":2,"c":3,"d":4}', { kind: 'items', limit: 3 }],
    ['items are counted per array, not in total', '[[1,2,3],[1,2,3],[1,2,3]]', null],
    ['brackets inside strings do not count', '["[[[[[[[[", "{{{{{{", ",,,,,,,"]', null],
    ['escaped quotes stay inside the string', '["a\\"[[[[[[[[\\"", 1]', null],
    ['an escaped backslash ends before the quote', '["a\\\\", [[[[1]]]]]', { kind: 'depth', limit: 4 }],
    ['commas at the top level (not JSON) are not items', '1,2,3,4,5', null],
    ['unterminated string: left to JSON.parse', '["[[[[[[[[[', null],
    ['stray closers do not hide later depth', ']]]][[[[[1', { kind: 'depth', limit: 4 }],
  ] as const)('%s', (_name, text, expected) => {
    expect(jsonShapeProblem(text, B)).toEqual(expected as never);
  });

  test('linear in the body: 1 MB within bounds and 1 MB of nesting take milliseconds, not seconds', () => {
    const strings = '[' + '"ab\\"c\\\\",'.repeat(90_000) + '1]';
    const deep = nest(500_000);
    const t0 = performance.now();
    expect(jsonShapeProblem(strings, { maxDepth: 64, maxItems: 1_000_000 })).toBeNull();
    expect(jsonShapeProblem(deep, { maxDepth: 64, maxItems: 10_000 })).toEqual({ kind: 'depth', limit: 64 });
    expect(jsonShapeProblem(deep, { maxDepth: 1000, maxItems: 10_000 })).toEqual({ kind: 'depth', limit: 1000 });
    expect(performance.now() - t0).toBeLessThan(250);
  });
});

describe.each(ENGINES)('JSON body bounds on %s', (engine) => {
  let s: TestServer;
  let key: string;

  beforeAll(async () => {
    s = await startServer(engine, {
      env: { BASALT_EXTENSIONS_DIR: REPO_EXTENSIONS },
      migrations: {
        '001_customers.sql':
          "CREATE TABLE public.customers (id serial PRIMARY KEY, name text, email text, meta jsonb, tags text[]); INSERT INTO public.customers (name) VALUES ('one');",
      },
    });
    key = await createKey(s, { permissions: ['db:query'], tables: ['customers'] });
  });
  afterAll(() => s.stop());

  const post = (path: string, raw: string, headers: Record<string, string> = {}) =>
    s.req('POST', path, { raw, headers: { 'content-type': 'application/json', ...headers } });
  const db = (raw: string) => post('/api/v1/db/query', raw, { 'x-api-key': key });
  /** Rows in customers, read through the Database API (the same on both targets). */
  const customers = async () =>
    (await db('{"entity":"customers","action":"select","fields":["id"],"limit":1,"total":true}')).body.data
      .total as number;

  /** The error's code and message, whatever the area's envelope. */
  function problem(r: { body: any }, format: 'A' | 'B'): { code: string; message: string } {
    if (format === 'B') {
      expect(r.body).toMatchObject({ success: false, meta: { trace_id: expect.any(String) } });
      return r.body.errors[0];
    }
    expect(r.body.success).toBe(false);
    return r.body.error;
  }

  // [name, path, body, headers?, format]: every one is refused before its route runs.
  const REFUSED: [string, string, () => string, 'A' | 'B', 'depth' | 'items'][] = [
    [
      'Database API, 65 levels (the probe: a jsonb filter value)',
      '/api/v1/db/query',
      () => dbSelect(nest(62)),
      'A',
      'depth',
    ],
    ['Database API, 20,000 levels', '/api/v1/db/query', () => dbSelect(nest(20_000)), 'A', 'depth'],
    ['Database API, 30,000 levels of objects', '/api/v1/db/query', () => dbSelect(deepObject(30_000)), 'A', 'depth'],
    [
      'Database API, an in list of 10,001 values',
      '/api/v1/db/query',
      () => `{"entity":"customers","action":"select","filters":[{"field":"id","op":"in","value":${array(10_001)}}]}`,
      'A',
      'items',
    ],
    [
      'Database API, insert data with 10,001 keys',
      '/api/v1/db/query',
      () => `{"entity":"customers","action":"insert","data":${object(10_001)}}`,
      'A',
      'items',
    ],
    [
      'login, 100,000 levels (no credentials needed)',
      '/api/v1/auth/login',
      () => `{"email":${nest(100_000, '"a@example.com"')},"password":"x"}`,
      'A',
      'depth',
    ],
    [
      'register, 65 levels',
      '/api/v1/auth/register',
      () => `{"email":"a@example.com","password":${nest(64, '"x"')}}`,
      'A',
      'depth',
    ],
    ['transaction begin, deep body', '/api/v1/db/transaction/begin', () => nest(100), 'A', 'depth'],
    [
      'mail send, deep variables',
      '/api/v1/mail/send',
      () => `{"to":["a@example.com"],"text":"x","variables":${nest(1000)}}`,
      'B',
      'depth',
    ],
    ['admin API, deep body', '/api/admin/login', () => nest(100_000), 'A', 'depth'],
    [
      'extension route (contact form), 100,000 levels',
      '/api/module/contact-form/submit',
      () => `{"name":"A","email":"a@example.com","message":${nest(100_000, '"m"')}}`,
      'B',
      'depth',
    ],
    ['unknown path, deep body', '/api/v1/nowhere', () => nest(100_000), 'A', 'depth'],
  ];

  test.each(REFUSED)('%s → 400 invalid_json', async (_name, path, body, format, kind) => {
    const r = await post(path, body(), { 'x-api-key': key });
    expect(r.status).toBe(400);
    const p = problem(r, format);
    expect(p.code).toBe('invalid_json');
    expect(p.message).toContain(kind === 'depth' ? 'web.max_json_depth' : 'web.max_json_items');
    expect(r.text).not.toMatch(/RangeError|stack|at .*\.ts/);
  });

  test('a body at exactly the bounds passes to its route', async () => {
    // 64 levels: the body's 3 around the value, then 61 in it.
    const atDepth = await db(dbSelect(nest(61)));
    expect(atDepth.status).toBe(200);
    expect(atDepth.body.data.rows).toEqual([]);
    const atItems = await db(
      `{"entity":"customers","action":"select","fields":["name"],"filters":[{"field":"id","op":"in","value":${array(10_000)}}]}`,
    );
    expect(atItems.status).toBe(200);
    expect(atItems.body.data.rows).toEqual([{ name: 'one' }]);
  });

  test('a deep jsonb value within the bound is stored and read back', async () => {
    const value = JSON.parse(nest(60, '{"x":1}'));
    const r = await s.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': key },
      body: { entity: 'customers', action: 'insert', data: { meta: value }, fields: ['meta'] },
    });
    expect(r.status).toBe(200);
    expect(r.body.data.rows[0].meta).toEqual(value);
  });

  test("at the largest allowed depth (1,000) a jsonb value round-trips: the setting cannot reach the engine's limit", async () => {
    await s.settings.set('web.max_json_depth', 1000);
    try {
      const value = JSON.parse(nest(997));
      const r = await s.req('POST', '/api/v1/db/query', {
        headers: { 'x-api-key': key },
        body: { entity: 'customers', action: 'insert', data: { meta: value }, fields: ['id', 'meta'] },
      });
      expect(r.status).toBe(200);
      expect(r.body.data.rows[0].meta).toEqual(value);
      const found = await db(dbSelect(nest(996)));
      expect(found.status).toBe(200);
      expect((await db(dbSelect(nest(998)))).status).toBe(400);
    } finally {
      await s.settings.unset('web.max_json_depth');
    }
    expect(
      await s.settings.set('web.max_json_depth', 1001).then(
        () => 'stored',
        () => 'refused',
      ),
    ).toBe('refused');
  });

  test('brackets inside strings are text, not nesting', async () => {
    const r = await s.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': key },
      body: {
        entity: 'customers',
        action: 'insert',
        data: { name: '['.repeat(50_000) + '"\\' + '{'.repeat(50_000) },
        fields: ['id'],
      },
    });
    expect(r.status).toBe(200);
  });

  test('a chunked body (no Content-Length) is bounded the same way', async () => {
    const text = dbSelect(nest(5000));
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < text.length; i += 1000) c.enqueue(new TextEncoder().encode(text.slice(i, i + 1000)));
        c.close();
      },
    });
    const res = await fetch(s.publicUrl + '/api/v1/db/query', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: stream,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.code).toBe('invalid_json');
  });

  test('the bounds are live settings', async () => {
    await s.settings.set('web.max_json_depth', 8);
    try {
      // 3 levels of the body around the value: 6 more is 9 > 8.
      expect((await db(dbSelect(nest(6)))).status).toBe(400);
      expect((await db(dbSelect(nest(5)))).status).toBe(200);
    } finally {
      await s.settings.unset('web.max_json_depth');
    }
    await s.settings.set('web.max_json_items', 3);
    try {
      expect(
        (await db(`{"entity":"customers","action":"select","filters":[{"field":"id","op":"in","value":[1,2,3,4]}]}`))
          .status,
      ).toBe(400);
    } finally {
      await s.settings.unset('web.max_json_items');
    }
    expect((await db(dbSelect(nest(30)))).status).toBe(200);
  });

  test('30,000 levels no longer stall the event loop: refused in milliseconds, health answers meanwhile', async () => {
    const body = dbSelect(nest(30_000));
    const t0 = performance.now();
    const rs = await Promise.all([...Array.from({ length: 8 }, () => db(body)), s.req('GET', '/healthz')]);
    expect(rs.slice(0, 8).map((r) => r.status)).toEqual(Array(8).fill(400));
    expect(rs[8]!.status).toBe(200);
    // Was 0.35–0.45 s of event loop per request; the scan stops at level 65.
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  describe('Database API input checks', () => {
    const field = (r: { body: any }) => Object.keys(r.body.error?.details?.fields ?? {});
    // The like cases: the column has no index, so Postgres evaluates the pattern and refuses it.
    test.each([
      ['in with a nested array', { op: 'in', field: 'name', value: [[null]] }, 'filters[0].value'],
      ['in with a nested array of values', { op: 'in', field: 'id', value: [1, [2, 3]] }, 'filters[0].value'],
      ['not_in with a nested array', { op: 'not_in', field: 'name', value: [['a']] }, 'filters[0].value'],
      ['in with an object', { op: 'in', field: 'name', value: [{ a: 1 }] }, 'filters[0].value'],
      ['like with a trailing backslash', { op: 'like', field: 'name', value: '\\' }, 'filters[0].value'],
      ['ilike with a trailing backslash', { op: 'ilike', field: 'name', value: '%\\' }, 'filters[0].value'],
    ])('%s → 400 naming the filter value', async (_name, filter, expected) => {
      const r = await s.req('POST', '/api/v1/db/query', {
        headers: { 'x-api-key': key },
        body: { entity: 'customers', action: 'select', filters: [filter] },
      });
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 400, code: 'validation_error' });
      expect(field(r)).toEqual([expected]);
      expect(r.body.error.message).toContain(expected);
    });

    test('a like pattern with an escaped backslash is fine', async () => {
      const r = await s.req('POST', '/api/v1/db/query', {
        headers: { 'x-api-key': key },
        body: { entity: 'customers', action: 'select', filters: [{ field: 'name', op: 'like', value: 'a\\\\%' }] },
      });
      expect(r.status).toBe(200);
    });

    test.each([
      [
        'insert, one row',
        '{"entity":"customers","action":"insert","data":{"name":"p","__proto__":{"name":"x"}}}',
        'data.__proto__',
      ],
      [
        'insert, bulk',
        '{"entity":"customers","action":"insert","data":[{"name":"p"},{"__proto__":{"admin":true}}]}',
        'data[1].__proto__',
      ],
      [
        'update',
        '{"entity":"customers","action":"update","data":{"__proto__":{"name":"x"}},"filters":[{"field":"id","op":"eq","value":1}]}',
        'data.__proto__',
      ],
      [
        'insert, constructor',
        '{"entity":"customers","action":"insert","data":{"constructor":{"prototype":{"x":1}}}}',
        'data.constructor',
      ],
    ])('__proto__ in %s → 400 naming it, nothing written', async (_name, raw, expected) => {
      const before = await customers();
      const r = await db(raw);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 400, code: 'validation_error' });
      expect(field(r)).toEqual([expected]);
      expect(await customers()).toBe(before);
    });
  });
});
