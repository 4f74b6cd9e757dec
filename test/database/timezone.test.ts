/**
 * Values on a server whose time zone is not UTC: timestamptz, scalar and in arrays,
 * still come back as ISO 8601 UTC with `Z` (docs/database.md, "Value representation").
 * External PostgreSQL only: the embedded engine's single session did not take a
 * database-level time zone, so the case cannot be staged there.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { query } from './fixtures';

const ZONE = 'Asia/Kolkata'; // +05:30, no daylight saving

describe.each(
  ENGINES.filter((e) => e === 'external'),
)('Database API timestamps on a %s server in a non-UTC time zone', (engine) => {
  let db: FreshDb;
  let s: TestServer;
  let key: string;
  const q = (body: Record<string, unknown>) => query(s, key, { entity: 'stamps', ...body });

  beforeAll(async () => {
    db = await freshDb(engine);
    // The zone is the database's default, so every connection the platform opens uses it.
    const c = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      const name = new URL(db.url).pathname.slice(1);
      await c.unsafe(`ALTER DATABASE "${name.replaceAll('"', '""')}" SET timezone = '${ZONE}'`);
    } finally {
      await c.end();
    }
    s = await startServer(engine, {
      db,
      migrations: {
        '001_stamps.sql':
          'CREATE TABLE public.stamps (id serial PRIMARY KEY, ts timestamptz, tsa timestamptz[], tsa2 timestamptz[][])',
      },
    });
    key = await createKey(s, { type: 'service', service: 'tz', permissions: ['db:query'], tables: ['stamps'] });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
    await db.drop();
  });

  test('the server really prints timestamps in the non-UTC zone', async () => {
    // On the source one of the platform's own connections; on the executable one that opens as its connections do.
    const rows = await s.sql<{ z: string; t: string }>(
      `SELECT current_setting('TimeZone') AS z, ('{"2024-01-02 03:04:05Z"}'::timestamptz[])::text AS t`,
    );
    expect(rows[0]).toEqual({ z: ZONE, t: '{"2024-01-02 08:34:05+05:30"}' });
  });

  const CASES: [string, unknown, unknown][] = [
    ['ts', '2024-01-02T03:04:05.123456Z', '2024-01-02T03:04:05.123456Z'],
    ['ts', '2024-01-02T05:04:05.5+02:00', '2024-01-02T03:04:05.5Z'],
    ['ts', '2024-01-01T02:00:00+05:30', '2023-12-31T20:30:00Z'], // crosses midnight and the year
    [
      'tsa',
      ['2024-01-02T03:04:05.123456Z', null, '2024-02-29T20:00:00-04:00', '2024-01-01T02:00:00+05:30'],
      ['2024-01-02T03:04:05.123456Z', null, '2024-03-01T00:00:00Z', '2023-12-31T20:30:00Z'],
    ],
    [
      'tsa2',
      [['2024-06-01T00:00:00Z', '2024-06-01T12:00:00.000001Z']],
      [['2024-06-01T00:00:00Z', '2024-06-01T12:00:00.000001Z']],
    ],
  ];

  test.each(CASES)('%s %j comes back in UTC with Z', async (col, sent, expected) => {
    const ins = await q({ action: 'insert', data: { [col]: sent }, fields: ['id', col] });
    expect(ins.status).toBe(200);
    expect(ins.body.data.rows[0][col]).toEqual(expected);
    const sel = await q({
      action: 'select',
      fields: [col],
      filters: [{ field: 'id', op: 'eq', value: ins.body.data.rows[0].id }],
    });
    expect(sel.body.data.rows).toEqual([{ [col]: expected }]);
    // Inside a transaction (a reserved connection on external) too.
    const b = await s.req('POST', '/api/v1/db/transaction/begin', { headers: { 'x-api-key': key }, body: {} });
    const id = b.body.data.transaction_id;
    const inTx = await q({
      action: 'select',
      fields: [col],
      filters: [{ field: 'id', op: 'eq', value: ins.body.data.rows[0].id }],
      transaction_id: id,
    });
    expect(inTx.body.data.rows).toEqual([{ [col]: expected }]);
    await s.req('POST', `/api/v1/db/transaction/${id}/rollback`, { headers: { 'x-api-key': key }, body: {} });
  });

  test('a UTC value read back filters back to the same row', async () => {
    const r = await q({
      action: 'select',
      fields: ['ts'],
      filters: [{ field: 'ts', op: 'eq', value: '2023-12-31T20:30:00Z' }],
    });
    expect(r.body.data.rows).toEqual([{ ts: '2023-12-31T20:30:00Z' }]);
  });
});
