/**
 * Row changes of large rows (docs/realtime.md, "Back-pressure and limits"): the hub reads the
 * outbox a page at a time, and a page holds at most about 16 MiB of row images (a page that
 * would hold more is read again an eighth as long, down to one event), so a backlog of 60
 * events of 1 MB — live, and replayed after Last-Event-ID — reaches a stream whole, in order,
 * none lost or repeated across the shortened pages. (That a refused page never gathers its
 * rows is the engines' answer bound, tested in test/database/answer-size.test.ts.) Over HTTP,
 * on the executable, both engines.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { openSse } from './sse';
import { serviceWriter, type Write } from './writer';

const ROW = 1_000_000;
const ROWS = 60;
const PER_INSERT = 4;
const MiB = 1024 * 1024;

const SCHEMA = `
CREATE TABLE public.blobs (id bigserial PRIMARY KEY, body text NOT NULL);
SELECT basalt.realtime_enable('blobs');`;

describe.each(ENGINES)('realtime events of large rows on %s', (engine) => {
  let s: TestServer;
  let key: string;
  let write: Write;

  beforeAll(async () => {
    s = await startServer(engine, {
      migrations: { '001_blobs.sql': SCHEMA },
      env: {
        BASALT_WEB_MAX_JSON_BODY_BYTES: String(PER_INSERT * ROW + 64 * 1024),
        // Room for a few 1 MB events waiting for the client.
        BASALT_REALTIME_BUFFER_BYTES: String(16 * MiB),
      },
    });
    ({ key, write } = await serviceWriter(s, ['blobs']));
  }, 120_000);
  afterAll(() => s.stop());

  test('60 events of 1 MB arrive whole and in order, live and replayed', async () => {
    const stream = (headers: Record<string, string> = {}) =>
      openSse(`${s.publicUrl}/api/v1/realtime?tables=blobs`, { 'x-api-key': key, ...headers });
    const c = await stream();
    expect(c.status).toBe(200);
    // The inserts commit while the stream listens; the hub reads them as one backlog.
    for (let i = 0; i < ROWS; i += PER_INSERT)
      await write('blobs', {
        action: 'insert',
        data: Array.from({ length: PER_INSERT }, (_, k) => ({ body: String((i + k) % 10).repeat(ROW) })),
        fields: ['id'],
      });
    const bodies = Array.from({ length: ROWS }, (_, i) => String(i % 10).repeat(ROW));
    const events = await c.waitFor(ROWS, undefined, 60_000);
    expect(events.map((e, i) => e.data.row.body === bodies[i])).toEqual(Array(ROWS).fill(true));
    const ids = events.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    c.close();
    // Replayed from the outbox after the first event: the other 59, once each, in order.
    const r = await stream({ 'last-event-id': events[0]!.id! });
    const replayed = await r.waitFor(ROWS - 1, undefined, 60_000);
    expect(replayed.map((e) => Number(e.id))).toEqual(ids.slice(1));
    expect(replayed.map((e, i) => e.data.row.body === bodies[i + 1])).toEqual(Array(ROWS - 1).fill(true));
    r.close();
  }, 120_000);
});
