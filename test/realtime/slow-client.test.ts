/**
 * A client that stops reading: its stream is cut once what waits for it passes
 * realtime.buffer_bytes (the queue dropped with the connection), the server's heap does
 * not grow with what the client did not read, and other streams carry on.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import net from 'node:net';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { eventually } from '../helpers/wait';
import { openSse } from './sse';

describe.each(ENGINES)('a slow realtime client on %s', (engine) => {
  let s: TestServer;
  let key: string;

  beforeAll(async () => {
    s = await startServer(engine);
    await s.platform.db.exec(
      `CREATE TABLE public.blobs (id serial PRIMARY KEY, body text NOT NULL); SELECT basalt.realtime_enable('blobs');`,
    );
    key = (
      await s.platform.services.keys.create({
        type: 'service',
        service: 'rt',
        permissions: ['db:query'],
        tables: ['blobs'],
      })
    ).key;
  });
  afterAll(() => s.stop());

  test('is cut off at the buffer bound without growing memory; a reading client gets everything', async () => {
    const port = Number(new URL(s.publicUrl).port);
    const sock = net.connect(port, '127.0.0.1');
    let received = 0;
    let closed = false;
    sock.on('data', (d) => {
      received += d.length;
      sock.pause(); // never read again: the kernel buffers fill, then the server's queue
    });
    sock.on('close', () => (closed = true));
    sock.on('error', () => {});
    await new Promise((r) => sock.once('connect', r));
    sock.write(`GET /api/v1/realtime?tables=blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${key}\r\n\r\n`);
    await eventually(() => s.platform.services.realtime.hub.streams.size === 1, { what: 'the stream' });
    // The reader counts its events and keeps none: this process's heap is the server's.
    const reader = await openSse(`${s.publicUrl}/api/v1/realtime?tables=blobs`, { 'x-api-key': key }, { keep: false });
    Bun.gc(true);
    const heapBefore = process.memoryUsage().heapUsed;
    // 24 MB of events (pages of 500 KB): far beyond what the socket buffers hold plus
    // realtime.buffer_bytes (1 MiB).
    for (let i = 0; i < 12; i++)
      await s.platform.db.query(
        `INSERT INTO public.blobs (body) SELECT repeat('x', 1000) FROM generate_series(1, 2000)`,
      );
    const counters = s.platform.services.realtime.hub.counters;
    await eventually(() => counters.slow === 1, { timeout: 60_000, what: 'the slow stream cut' });
    expect(s.platform.services.realtime.hub.streams.size).toBe(1); // the reading one stays
    await reader.waitFor(24_000, 'change', 90_000);
    // The unread 24 MB never piled up here: a server that kept them would stay past 16 MiB.
    // Full collections until the heap is back under it (what one leaves, such as the last
    // pages' buffers still referenced while the reader finished, goes with a later one; on a
    // loaded machine once 19 MiB after two). (When the reader kept its 24,000 parsed events,
    // a stale reference to them, after they were dropped, once read as 53 MB of server heap.)
    const grown = () => {
      Bun.gc(true);
      return process.memoryUsage().heapUsed - heapBefore;
    };
    await eventually(grown, {
      until: (bytes) => bytes < 16 * 1024 * 1024,
      interval: 250,
      what: 'the heap back within 16 MiB of where it was',
    });
    sock.resume();
    await eventually(() => closed, { timeout: 30_000, what: 'the connection closed by the server' });
    expect(received).toBeLessThan(24 * 1024 * 1024);
    reader.close();
  });
});
