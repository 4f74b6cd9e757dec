import { afterAll, beforeAll, expect, test } from 'bun:test';
import { PGlite } from '@electric-sql/pglite';
import { WireStatements } from '../../src/db/embedded-wire';

// The embedded wire path decodes each field of a DataRow: an ASCII field as a substring of the
// answer decoded once as latin1, any other as UTF-8 of its own. Its rows must be what PGlite's own
// query returns, field for field, with ASCII, non-ASCII, NULL, short and long values in one row.
let pg: PGlite;
let wire: WireStatements;

beforeAll(async () => {
  pg = await PGlite.create();
  wire = new WireStatements(pg, () => {});
});
afterAll(() => pg.close());

const LONG_ASCII = 'a'.repeat(200);
const LONG_UTF8 = `${'b'.repeat(100)}é${'c'.repeat(100)}`;
const SQL = `SELECT $1::text AS ascii, $2::text AS accented, NULL::text AS nothing, $3::text AS emoji,
  42::int4 AS i4, 9007199254740993::int8 AS i8, 12.50::numeric AS num, 1.25::float8 AS f8, true AS b,
  $4::text AS long_ascii, $5::text AS long_utf8, '{"k": "wörld", "n": 1}'::jsonb AS jb,
  ARRAY['x', 'ÿ', NULL]::text[] AS ta, '\\xdeadbeef'::bytea AS by, '2024-01-02 03:04:05Z'::timestamptz AS ts,
  ''::text AS empty, 'ascii again' AS tail`;
const PARAMS = ['plain', 'héllo wörld', 'smile 😀 日本', LONG_ASCII, LONG_UTF8];

test('a row of ASCII, non-ASCII, NULL and typed fields decodes as PGlite.query decodes it', async () => {
  const expected = (await pg.query<Record<string, unknown>>(SQL, PARAMS)).rows;
  const batched = (await wire.batch([{ sql: SQL, params: PARAMS }]))[0]!.rows;
  const single = (await wire.query(SQL, PARAMS)).rows;
  expect(batched).toEqual(expected);
  expect(single).toEqual(expected);
  const row = batched[0] as Record<string, unknown>;
  expect(row.accented).toBe('héllo wörld');
  expect(row.emoji).toBe('smile 😀 日本');
  expect(row.nothing).toBeNull();
  expect(row.long_utf8).toBe(LONG_UTF8);
  expect(row.tail).toBe('ascii again');
});

test('many rows, some with non-ASCII fields, in a batch of two statements', async () => {
  const sql = `SELECT g AS n, CASE WHEN g % 3 = 0 THEN 'ñ' || g ELSE 'n' || g END AS name,
    CASE WHEN g % 4 = 0 THEN NULL ELSE repeat('z', g) END AS pad FROM generate_series(1, 150) g`;
  const expected = (await pg.query<Record<string, unknown>>(sql)).rows;
  const [a, b] = await wire.batch([
    { sql, params: [] },
    { sql: 'SELECT $1::text AS v', params: ['über'] },
  ]);
  expect(a!.rows).toEqual(expected);
  expect(b!.rows).toEqual([{ v: 'über' }]);
});

test('the rows a write touched are counted; a select counts none', async () => {
  await wire.batch([{ sql: 'CREATE TABLE IF NOT EXISTS counted (n int)', params: [] }]);
  const [ins, upd, sel, del] = await wire.batch([
    { sql: 'INSERT INTO counted SELECT generate_series(1, 5)', params: [] },
    { sql: 'UPDATE counted SET n = n + 1 WHERE n > $1', params: ['2'] },
    { sql: 'SELECT n FROM counted', params: [] },
    { sql: 'DELETE FROM counted WHERE n < $1', params: ['4'] },
  ]);
  expect([ins!.affectedRows, upd!.affectedRows, sel!.affectedRows, del!.affectedRows]).toEqual([5, 3, 0, 2]);
  const merged = await wire.query(
    'MERGE INTO counted c USING (SELECT 6 AS n) s ON c.n = s.n WHEN MATCHED THEN DELETE',
    [],
  );
  expect(merged.affectedRows).toBe(1);
});
