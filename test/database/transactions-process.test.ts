/**
 * Database API transactions, the two checks that reach into the serving process, so on the
 * source only (the rest: ./transactions.test.ts, run against the executable too):
 * - the server-side backstop (idle_in_transaction_session_timeout) ends a transaction whose
 *   process stopped tending it: played by disarming this process's own idle timer;
 * - the first step of a stop (drain), while the listener still answers: the executable's
 *   SIGTERM runs the whole stop at once, so that moment cannot be held from outside.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { eventually } from '../helpers/wait';
import { expectError, query, tx } from './fixtures';

describe.each(ENGINES.filter((e) => e === 'external'))('Database API transactions in process on %s', (engine) => {
  let s: TestServer;
  let key: string;
  const q = (body: Record<string, unknown>) => query(s, key, { entity: 'notes', ...body });
  const begin = async () => {
    const r = await tx(s, key, 'begin');
    expect(r.status).toBe(200);
    return r.body.data.transaction_id as string;
  };
  beforeAll(async () => {
    s = await startServer(engine, {
      migrations: { '001_notes.sql': 'CREATE TABLE public.notes (id serial PRIMARY KEY, body text NOT NULL UNIQUE)' },
    });
    key = await createKey(s, { type: 'service', service: 'a', permissions: ['db:query'], tables: ['notes'] });
    expect((await q({ action: 'insert', data: [{ body: 'one' }, { body: 'two' }] })).status).toBe(200);
  });
  afterAll(() => s.stop());

  test.if(engine === 'external')(
    'idle_in_transaction_session_timeout ends the session on the server even if the process never rolls back',
    async () => {
      await s.settings.set('db.transaction_idle_timeout_ms', 1000);
      const direct = postgres(s.db.url, { max: 1, onnotice: () => {} });
      try {
        const id = await begin();
        await q({
          action: 'update',
          data: { body: 'orphan' },
          filters: [{ field: 'body', op: 'eq', value: 'two' }],
          transaction_id: id,
        });
        const keyId = (await s.platform.services.keys.verify(key))!.id;
        const pid = (
          await s.platform.services.database.transactions.run(id, keyId, undefined, (c) =>
            c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'),
          )
        ).rows[0]!.pid;
        // Play a process that stopped tending its transaction: disarm the platform's idle timer.
        const entry = (s.platform.services.database.transactions as any).open.get(id);
        clearTimeout(entry.timer);
        entry.ended = true;
        const alive = async () =>
          (await direct`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ${pid}`)[0]!.n === 1;
        const t0 = Date.now();
        expect(await alive()).toBe(true);
        // Backstop = idle timeout + 5 s = 6 s after the last statement.
        await eventually(async () => !(await alive()), { timeout: 10_000, interval: 100, what: 'the backend to end' });
        const gone = Date.now() - t0;
        expect(gone).toBeGreaterThanOrEqual(5500);
        expect(gone).toBeLessThan(10_000);
        const after = await direct.begin(async (d) => {
          await d`SET LOCAL lock_timeout = 200`;
          return d`UPDATE public.notes SET body = 'two' WHERE body = 'two' RETURNING body`;
        });
        expect(after.length).toBe(1);
        (s.platform.services.database.transactions as any).open.delete(id);
      } finally {
        await direct.end();
        await s.settings.set('db.transaction_idle_timeout_ms', 30_000);
      }
    },
    20_000,
  );
});

describe.each(ENGINES)('the first step of a stop, with an open transaction, on %s', (engine) => {
  test('once the stop begins, a begin and a request on an open id answer 503 shutting_down; the transaction is rolled back', async () => {
    const own = await startServer(engine, {
      migrations: { '001_pending.sql': 'CREATE TABLE public.pending (id int)' },
    });
    const k = await createKey(own, { type: 'service', service: 'sd', permissions: ['db:query'], tables: ['pending'] });
    const call = (path: string, body: unknown = {}) =>
      own.req('POST', `/api/v1/db/${path}`, { headers: { 'x-api-key': k }, body });
    const insert = (id: string) =>
      call('query', { entity: 'pending', action: 'insert', data: { id: 1 }, transaction_id: id });
    const id: string = (await call('transaction/begin')).body.data.transaction_id;
    expect((await insert(id)).status).toBe(200);
    // What serve's stop does first, while the listener still answers.
    await own.platform.drain();
    expectError(await call('transaction/begin'), 503, 'shutting_down');
    expectError(await insert(id), 503, 'shutting_down');
    expectError(await call(`transaction/${id}/commit`), 503, 'shutting_down');
    expectError(await call(`transaction/${id}/rollback`), 503, 'shutting_down');
    // Queries outside a transaction still run until the listener stops.
    expect((await call('query', { entity: 'pending', action: 'select' })).body.data.rows).toEqual([]);
    await own.stop();
  }, 40_000);
});
