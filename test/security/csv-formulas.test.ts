/**
 * CSV export and spreadsheet formulas (docs/admin.md "Data browser"): a text cell starting
 * with =, +, -, @, a tab or a carriage return is written with a leading ' by default, so a
 * spreadsheet shows it as text; plain numbers stay as they are; `?formulas=keep` writes
 * every value as stored (machine consumers, a round trip through import). Before, the
 * export wrote `=cmd|' /C calc'!A0` as it was.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { startAdminServer } from '../admin/support';
import { expectAError } from '../helpers/envelopes';

const HOSTILE = ["=cmd|' /C calc'!A0", '+1+1', '-2+3', '@SUM(1+1)', '\tx', '\rx', '=1'];

describe.each(ENGINES)('CSV export neutralises formulas on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basalt-csv-formulas-'));
    writeFileSync(
      join(dir, '001.sql'),
      `CREATE TABLE cells (id integer PRIMARY KEY, t text, n numeric, i integer);
       INSERT INTO cells VALUES ${HOSTILE.map((v, i) => `(${i + 1}, '${v.replace(/'/g, "''").replace('\t', "' || chr(9) || '").replace('\r', "' || chr(13) || '")}', -1.5, -${i + 1})`).join(', ')},
         (100, 'plain', 2, 3), (101, '-5', +7, 0);`,
    );
    s = await startAdminServer(engine, { env: { BASALT_MIGRATIONS_DIR: dir } });
    a = await signInAdmin(s);
  }, 180_000);
  afterAll(() => s.stop());

  const csv = async (query = '') => {
    const r = await fetch(
      `${s.url}/api/admin/data/cells/export.csv?sort=${encodeURIComponent('[{"field":"id"}]')}${query}`,
      {
        headers: a.headers(),
      },
    );
    expect(r.status).toBe(200);
    return r.text();
  };

  test('by default every formula-looking text cell gets a leading quote; numbers stay numbers', async () => {
    const text = await csv();
    expect(text).toBe(
      'id,t,n,i\r\n' +
        "1,'=cmd|' /C calc'!A0,-1.5,-1\r\n" +
        "2,'+1+1,-1.5,-2\r\n" +
        "3,'-2+3,-1.5,-3\r\n" +
        "4,'@SUM(1+1),-1.5,-4\r\n" +
        "5,'\tx,-1.5,-5\r\n" +
        `6,"'\rx",-1.5,-6\r\n` +
        "7,'=1,-1.5,-7\r\n" +
        '100,plain,2,3\r\n' +
        '101,-5,7,0\r\n',
    );
    // No cell of the export starts with a formula character unless it is a plain number.
    for (const line of text.trim().split('\r\n').slice(1))
      for (const cell of line.split(',')) expect(/^[=+@]/.test(cell) || /^-(?![\d.])/.test(cell)).toBe(false);
  });

  test('formulas=keep writes the values as stored (machine consumers); anything else is a 400', async () => {
    const text = await csv('&formulas=keep');
    expect(text).toContain("1,=cmd|' /C calc'!A0,-1.5,-1\r\n");
    expect(text).toContain('2,+1+1,-1.5,-2\r\n');
    expect(text).toContain('4,@SUM(1+1),-1.5,-4\r\n');
    const bad = await adminReq(s, a, 'GET', '/api/admin/data/cells/export.csv?formulas=raw');
    expectAError(bad, 400, 'validation_error', { details: { fields: { formulas: expect.any(String) } } });
  });
});
