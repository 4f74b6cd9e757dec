/**
 * A hook's delivery (src/modules/jobs/hooks.ts) in this process, on both engines, with
 * handlers the HTTP suite (jobs.test.ts) cannot make fail on purpose:
 * - a try that found the platform's database busy (DatabaseBusyError) is not one of the
 *   attempts: with `attempts: 1` the event is still handled, not parked;
 * - a handler's own error uses the attempts up and parks the event, and the hook goes on;
 * - a backlog crossing a digit boundary of the event ids (999 → 1000) is delivered in id
 *   order, every event once (pages were once sorted by the ids' text).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DatabaseBusyError } from '../../src/db/engine';
import { HookDelivery, type HookDef, type RowEvent } from '../../src/modules/jobs/hooks';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { eventually } from '../helpers/wait';

describe.each(ENGINES)('hook delivery (%s)', (engine) => {
  let s: TestServer;
  const deliveries: HookDelivery[] = [];

  beforeAll(async () => {
    s = await startServer(engine, {
      migrations: { '001_t.sql': 'CREATE TABLE public.hooked (id int PRIMARY KEY, note text NOT NULL);' },
    });
  }, 120_000);

  afterAll(async () => {
    for (const d of deliveries) await d.stop();
    await s?.stop();
  });

  /** A delivery of one hook on `hooked` (`note` = `note`) with its own worker; its parked events. */
  async function deliver(name: string, note: string, handler: (e: RowEvent) => unknown, attempts = 1) {
    const parked: RowEvent[] = [];
    const p = s.platform;
    const hook: HookDef = {
      extension: 'hook-test',
      name,
      source: 'table:public.hooked',
      table: { schema: 'public', name: 'hooked', actions: ['insert'] },
      handler: (e) => ((e as RowEvent).row.note === note ? handler(e as RowEvent) : undefined),
      attempts,
      backoffMs: 20,
    };
    const d = new HookDelivery({
      db: p.db,
      settings: p.settings,
      log: p.log,
      worker: `test-${name}`,
      hooks: () => [hook],
      park: async (_tx, _h, e) => void parked.push(e as RowEvent),
    });
    deliveries.push(d);
    await d.start();
    return parked;
  }

  const insert = (from: number, n: number, note: string) =>
    s.platform.db.query('INSERT INTO public.hooked (id, note) SELECT g, $3 FROM generate_series($1::int, $2::int) g', [
      from,
      from + n - 1,
      note,
    ]);

  test('a try the database was busy for is not counted; a handler error parks the event', async () => {
    let tries = 0;
    const handled: number[] = [];
    const parkedBusy = await deliver('busy', 'busy', (e) => {
      tries++;
      if (tries <= 2) throw new DatabaseBusyError(1);
      handled.push(e.row.id as number);
    });
    const failing: number[] = [];
    const parkedFailing = await deliver('failing', 'failing', (e) => {
      failing.push(e.row.id as number);
      if (e.row.id === 1_000_001) throw new Error('the handler itself failed');
    });
    await insert(1, 1, 'busy');
    await insert(1_000_001, 2, 'failing');
    await eventually(() => handled.length === 1 && failing.includes(1_000_002), { what: 'both hooks through' });
    expect(tries).toBe(3);
    expect(parkedBusy).toEqual([]);
    // Tried once (attempts: 1), parked, and the next event handled.
    expect(failing).toEqual([1_000_001, 1_000_002]);
    expect(parkedFailing.map((e) => e.row.id)).toEqual([1_000_001]);
  }, 60_000);

  test('a backlog across 999 → 1000 of the event ids comes in id order, each event once', async () => {
    // Ids into the thousands first, so the backlog below crosses a digit boundary of its own.
    const { rows } = await s.platform.db.query<{ id: string }>(
      'SELECT coalesce(max(id), 0)::text AS id FROM basalt.realtime_outbox',
    );
    const head = Number(rows[0]!.id);
    const boundary = 10 ** String(head + 300).length;
    // The hook starts at the head, then a backlog of events from below the boundary to 300 past it.
    const seen: number[] = [];
    await deliver('order', 'order', (e) => void seen.push(Number(e.id)));
    const n = boundary - head + 300;
    await insert(2_000_001, n, 'order');
    await eventually(() => seen.length >= n, { timeout: 30_000, what: `${n} events at the hook` });
    expect(seen.length).toBe(n);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(seen[0]! < boundary && seen.at(-1)! >= boundary).toBe(true);
  }, 60_000);
});
