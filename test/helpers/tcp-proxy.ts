/**
 * A TCP proxy in front of PostgreSQL that a test can cut and restore, to see the
 * platform answer 503 while the database is away and recover when it is back; and that
 * counts round trips: how many times a client sent something after the server had answered
 * (statements sent together, pipelined, are one), per connection, by the connection's
 * application_name (its startup message names it).
 */
import type { Socket, TCPSocketListener } from 'bun';

export interface Proxy {
  port: number;
  /** Close the listener and every open connection (the database "goes away"). */
  cut(): void;
  /** Listen again on the same port. */
  restore(): void;
  stop(): void;
  /** Round trips so far on connections whose startup message names `applicationName`. */
  roundTrips(applicationName: string): number;
  /**
   * Client sends so far, on those connections, that name a statement of Basalt's own wire path
   * (`basalt_wire_…`, src/db/external-wire.ts): the sends that went as batches, not through the driver.
   */
  wireSends(applicationName: string): number;
}

interface Conn {
  upstream?: Socket<any>;
  pending: Uint8Array[];
  /** The startup message (the first chunk), as text: it carries application_name. */
  startup?: string;
  /** Who sent last: a client send after the server's counts as a round trip. */
  last: 'client' | 'server';
  trips: number;
  /** Client sends naming a `basalt_wire_` statement. */
  wire: number;
}

export function tcpProxy(targetHost: string, targetPort: number): Proxy {
  const open = new Set<Socket<any>>();
  const conns = new Set<Conn>();
  let listener: TCPSocketListener<any> | undefined;
  let port = 0;

  const start = () => {
    listener = Bun.listen<Conn>({
      hostname: '127.0.0.1',
      port,
      socket: {
        async open(client) {
          client.data = { pending: [], last: 'server', trips: 0, wire: 0 };
          conns.add(client.data);
          open.add(client);
          try {
            const upstream = await Bun.connect({
              hostname: targetHost,
              port: targetPort,
              socket: {
                data(_s, chunk) {
                  client.data.last = 'server';
                  client.write(chunk);
                },
                close() {
                  client.end();
                },
                error() {
                  client.end();
                },
              },
            });
            open.add(upstream);
            client.data.upstream = upstream;
            for (const c of client.data.pending) upstream.write(c);
            client.data.pending = [];
          } catch {
            client.end();
          }
        },
        data(client, chunk) {
          client.data.startup ??= Buffer.from(chunk).toString('latin1');
          if (client.data.last === 'server') client.data.trips++;
          client.data.last = 'client';
          if (Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).includes('basalt_wire_'))
            client.data.wire++;
          if (client.data.upstream) client.data.upstream.write(chunk);
          else client.data.pending.push(new Uint8Array(chunk));
        },
        close(client) {
          client.data.upstream?.end();
          open.delete(client);
        },
        error(client) {
          client.data.upstream?.end();
        },
      },
    });
    port = listener.port;
  };
  start();
  return {
    get port() {
      return port;
    },
    cut() {
      listener?.stop(true);
      listener = undefined;
      for (const s of open) s.terminate();
      open.clear();
    },
    restore() {
      if (!listener) start();
    },
    stop() {
      this.cut();
    },
    roundTrips(applicationName) {
      let n = 0;
      for (const c of conns) if (c.startup?.includes(`application_name\0${applicationName}\0`)) n += c.trips;
      return n;
    },
    wireSends(applicationName) {
      let n = 0;
      for (const c of conns) if (c.startup?.includes(`application_name\0${applicationName}\0`)) n += c.wire;
      return n;
    },
  };
}
