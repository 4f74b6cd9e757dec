/**
 * Two instances on one external database: a change written through one reaches streams on
 * the other; ids follow commit order under concurrent writers; revoking a key on one
 * instance ends its streams on the other.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { ADMIN_URL } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey, revokeKey } from '../helpers/keys';
import { openSse } from './sse';

describe.skipIf(!ADMIN_URL)('realtime across two instances on one external database', () => {
  let a: TestServer;
  let b: TestServer;
  let key: string;
  let sql: postgres.Sql;
  const stream = (s: TestServer, q = 'tables=notes', k = key) =>
    openSse(`${s.publicUrl}/api/v1/realtime?${q}`, { 'x-api-key': k });

  beforeAll(async () => {
    const migrations = {
      '001_notes.sql': `CREATE TABLE public.notes (id bigserial PRIMARY KEY, body text NOT NULL); SELECT basalt.realtime_enable('notes');`,
    };
    a = await startServer('external', { migrations });
    b = await startServer('external', { db: a.db, migrations });
    key = await createKey(a, { type: 'service', service: 'rt', permissions: ['db:query'], tables: ['notes'] });
    sql = postgres(a.db.url, { max: 8, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql?.end();
    await b?.stop();
    await a?.stop();
  });

  test('a change written through A reaches a stream on B; a resume on A picks up where B left off', async () => {
    const onB = await stream(b);
    expect(onB.status).toBe(200);
    const r = await a.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': key },
      body: { entity: 'notes', action: 'insert', data: { body: 'from A' } },
    });
    expect(r.status).toBe(200);
    const [ev] = await onB.waitFor(1);
    expect(ev!.data.row.body).toBe('from A');
    onB.close();
    await sql`INSERT INTO notes (body) VALUES ('while away')`;
    const onA = await stream(a, 'tables=notes');
    const resumed = await openSse(`${a.publicUrl}/api/v1/realtime?tables=notes`, {
      'x-api-key': key,
      'last-event-id': ev!.id!,
    });
    const [missed] = await resumed.waitFor(1);
    expect(missed!.data.row.body).toBe('while away');
    onA.close();
    resumed.close();
  });

  test('ids follow commit order, not write order; concurrent writers: every event once, ids increasing', async () => {
    const c = await stream(b);
    const t1 = await sql.reserve();
    const t2 = await sql.reserve();
    await t1`BEGIN`;
    await t1`INSERT INTO notes (body) VALUES ('written first, committed last')`;
    await t2`BEGIN`;
    await t2`INSERT INTO notes (body) VALUES ('written last, committed first')`;
    await t2`COMMIT`;
    await t1`COMMIT`;
    t1.release();
    t2.release();
    const two = await c.waitFor(2);
    expect(two.map((e) => e.data.row.body)).toEqual(['written last, committed first', 'written first, committed last']);

    const writers = 6;
    const each = 25;
    await Promise.all(
      Array.from({ length: writers }, (_, w) =>
        (async () => {
          for (let i = 0; i < each; i++)
            await sql.begin(async (tx) => {
              await tx`INSERT INTO notes (body) VALUES (${`w${w}-${i}-a`})`;
              await tx`INSERT INTO notes (body) VALUES (${`w${w}-${i}-b`})`;
            });
        })(),
      ),
    );
    const all = await c.waitFor(2 + writers * each * 2, 'change', 30_000);
    const ids = all.map((e) => Number(e.id));
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) expect(ids[i]!).toBeGreaterThan(ids[i - 1]!);
    // A transaction's two rows are adjacent: nothing else committed between them.
    const bodies = all.slice(2).map((e) => e.data.row.body as string);
    for (let i = 0; i < bodies.length; i += 2) expect(bodies[i + 1]).toBe(bodies[i]!.replace(/-a$/, '-b'));
    c.close();
  });

  test('revoking the key on A ends its streams on B at once', async () => {
    const other = await createKey(a, { type: 'service', service: 'rt2', permissions: ['db:query'], tables: ['notes'] });
    const onB = await stream(b, 'tables=notes', other);
    expect(onB.status).toBe(200);
    await revokeKey(a, other);
    await onB.ended;
    expect(onB.of('revoked')).toHaveLength(1);
  });
});
