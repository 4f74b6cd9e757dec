/**
 * A TCP proxy in front of PostgreSQL that a test can cut and restore, to see the
 * platform answer 503 while the database is away and recover when it is back.
 */
import type { Socket, TCPSocketListener } from 'bun';

export interface Proxy {
  port: number;
  /** Close the listener and every open connection (the database "goes away"). */
  cut(): void;
  /** Listen again on the same port. */
  restore(): void;
  stop(): void;
}

export function tcpProxy(targetHost: string, targetPort: number): Proxy {
  const open = new Set<Socket<any>>();
  let listener: TCPSocketListener<any> | undefined;
  let port = 0;

  const start = () => {
    listener = Bun.listen<{ upstream?: Socket<any>; pending: Uint8Array[] }>({
      hostname: '127.0.0.1',
      port,
      socket: {
        async open(client) {
          client.data = { pending: [] };
          open.add(client);
          try {
            const upstream = await Bun.connect({
              hostname: targetHost,
              port: targetPort,
              socket: {
                data(_s, chunk) {
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
  };
}
