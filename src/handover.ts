/**
 * One `basalt serve` taking over another on the same data dir and port, with no request
 * dropped (docs/operations.md, "Upgrading"; docs/architecture.md, "Handing over a running
 * instance").
 *
 * Both processes bind their ports with SO_REUSEPORT. The new one asks the old one over the
 * management socket (src/cli/control-socket.ts). From then on the old one:
 *
 * 1. holds every new request (`HandoverGate`), finishes the ones in flight, runs its shutdown
 *    steps (mail claims given back, API transactions rolled back, workers stopped) and closes
 *    the database: on the embedded engine that frees the data dir for the new process;
 * 2. once the new process answers on its private socket (`<data.dir>/basalt-next-<pid>.sock`,
 *    owner only), forwards the held requests and every later one there, each answer with
 *    `Connection: close`, so its clients' next connections are new ones;
 * 3. keeps its listeners, and so its accept queues, until no request has reached it for a
 *    while, and only then closes them: a listener closed with connections in its queue has
 *    them reset by the kernel (unless `net.ipv4.tcp_migrate_req` is 1, which moves them to
 *    the new process's listener).
 *
 * The new process binds its ports as soon as it serves: new connections are shared between
 * the two until the old one closes its listeners.
 */
import { chmodSync, existsSync, readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'bun';
import { alive } from './db/datadir-lock';

/** The original client's address on a forwarded request (set by the old process, never the client's). */
const PEER_HEADER = 'x-basalt-handover-peer';
/** Which listener of the old process the request reached: `main` or `public`. */
const LISTENER_HEADER = 'x-basalt-handover-listener';
/** The old process closes its listeners once no request has reached it (nor an answer left) for this long. */
const QUIET_MS = 1000;
/**
 * …or after this long at most: clients that open a connection per request never leave it
 * quiet, and for them any moment is as good as another (docs/bench/2026-11-29-takeover.md).
 */
const QUIET_MAX_MS = 5000;
const POLL_MS = 20;

/** Linux's net.ipv4.tcp_migrate_req (1: a closing listener's queued connections move to another), when readable. */
export function migratesQueuedConnections(): boolean | undefined {
  try {
    return readFileSync('/proc/sys/net/ipv4/tcp_migrate_req', 'utf8').trim() === '1';
  } catch {
    return undefined;
  }
}

export type ListenerName = 'main' | 'public';
export type Fetch = (req: Request, server: Server<unknown>) => Promise<Response>;

/** What the new process asks over the management socket. */
export interface HandoverAsk {
  pid: number;
  /** The ports it will listen on (main, public: 0 when it has none). */
  port: number;
  publicPort: number;
  /** Its private socket, where the old process forwards requests. */
  next: string;
}

/** The old process's answer: accepted (with what the new one needs to wait for), or why not. */
export type HandoverAnswer =
  | { accepted: true; pid: number; waitMs: number; shutdownMs: number }
  | { accepted: false; reason: string };

export function nextSocketPath(dataDir: string, pid = process.pid): string {
  return join(dataDir, `basalt-next-${pid}.sock`);
}

/** Remove the private sockets of processes that died while taking over (a live one's stays). */
export function removeStaleNextSockets(dataDir: string): void {
  for (const name of readdirSync(dataDir)) {
    const pid = /^basalt-next-(\d+)\.sock$/.exec(name)?.[1];
    if (pid && Number(pid) !== process.pid && !alive(Number(pid)))
      try {
        unlinkSync(join(dataDir, name));
      } catch {}
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The old process's side: wraps each listener's fetch. While it serves, a request goes
 * straight through (one comparison); once `hold` is called, requests wait for the new
 * process (at most `waitMs` each, then `refuse` answers 503 `restarting`) and are forwarded.
 */
export class HandoverGate {
  private holding = false;
  private next?: HandoverAsk;
  private ready?: Promise<boolean>;
  private waitMs = 0;
  /** Requests that came through `later` and have not returned yet. */
  private passing = 0;
  private lastArrival = 0;
  readonly stats = { held: 0, forwarded: 0, refused: 0, maxWaitMs: 0 };

  constructor(private readonly refuse: (name: ListenerName) => Fetch) {}

  wrap(name: ListenerName, fetch: Fetch): Fetch {
    return (req, server) => (this.holding ? this.later(name, req, server) : fetch(req, server));
  }

  /**
   * From now on hold requests for `next` (each at most `waitMs`); resolves true once it
   * answers, false if it dies or has not answered by `deadline` (a `performance.now()` time).
   */
  hold(next: HandoverAsk, waitMs: number, deadline: number): Promise<boolean> {
    this.next = next;
    this.waitMs = waitMs;
    this.holding = true;
    this.lastArrival = performance.now();
    return (this.ready = (async () => {
      // The new process may first wait for this one's engine to close: the caller sets the deadline.
      while (performance.now() < deadline) {
        if (!alive(next.pid)) return false;
        if (await answers(next.next)) {
          // The held requests go now, and their clients come back on new connections: quiet counts from here.
          this.lastArrival = performance.now();
          return true;
        }
        await sleep(POLL_MS);
      }
      return false;
    })());
  }

  /** Requests that entered before `hold` and are still running on this process. */
  direct(servers: Server<unknown>[]): number {
    return servers.reduce((n, s) => n + s.pendingRequests, 0) - this.passing;
  }

  /**
   * Resolves once no request has reached this process, nor an answer left it (after which its
   * client opens a new connection), for QUIET_MS; or after QUIET_MAX_MS.
   */
  async quiet(): Promise<void> {
    const end = performance.now() + QUIET_MAX_MS;
    while (performance.now() - this.lastArrival < QUIET_MS && performance.now() < end) await sleep(50);
  }

  private async later(name: ListenerName, req: Request, server: Server<unknown>): Promise<Response> {
    const start = performance.now();
    this.lastArrival = start;
    this.passing++;
    try {
      let timer: Timer | undefined;
      const late = new Promise<false>((r) => (timer = setTimeout(() => r(false), this.waitMs)));
      const ok = await Promise.race([this.ready!, late]).finally(() => clearTimeout(timer));
      const waited = performance.now() - start;
      if (waited > 1) this.stats.held++;
      if (waited > this.stats.maxWaitMs) this.stats.maxWaitMs = Math.round(waited);
      if (ok) {
        try {
          const res = await forward(this.next!.next, name, req, server);
          this.stats.forwarded++;
          this.lastArrival = performance.now();
          return res;
        } catch {
          // The new process went away under the request: refused below, as if it had never answered.
        }
      }
      this.stats.refused++;
      return await this.refuse(name)(req, server);
    } finally {
      this.passing--;
    }
  }
}

/** Whether a process serves on the private socket `path`. */
async function answers(path: string): Promise<boolean> {
  if (!existsSync(path)) return false;
  return fetch('http://localhost/healthz', { unix: path }).then(
    (r) => r.ok,
    () => false,
  );
}

/** `req` sent on to the new process, its answer closing the client's connection afterwards. */
async function forward(path: string, name: ListenerName, req: Request, server: Server<unknown>): Promise<Response> {
  const headers = new Headers(req.headers);
  headers.set(PEER_HEADER, server.requestIP(req)?.address ?? '');
  headers.set(LISTENER_HEADER, name);
  const res = await fetch(req.url, {
    method: req.method,
    headers,
    body: req.method === 'GET' || req.method === 'HEAD' ? undefined : req.body,
    unix: path,
    redirect: 'manual',
    signal: req.signal,
  });
  const out = new Response(res.body, { status: res.status, statusText: res.statusText, headers: res.headers });
  out.headers.set('connection', 'close');
  return out;
}

/**
 * The new process's side: serve the listeners' handlers on the private socket `path`, where
 * the old process forwards. The client's address comes from the old process's header (only
 * the data dir's owner can open the socket). Returns the stop function.
 */
export function serveForwarded(path: string, handlers: Record<ListenerName, Fetch | undefined>): () => void {
  if (existsSync(path)) unlinkSync(path);
  const previous = process.umask(0o077);
  let server: Server<unknown>;
  try {
    server = Bun.serve({
      unix: path,
      development: false,
      maxRequestBodySize: 10 * 1024 * 1024 * 1024,
      fetch(req, self) {
        const name: ListenerName = req.headers.get(LISTENER_HEADER) === 'public' ? 'public' : 'main';
        const peer = req.headers.get(PEER_HEADER) || '127.0.0.1';
        return (handlers[name] ?? handlers.main)!(req, asPeer(self, peer));
      },
    });
  } finally {
    process.umask(previous);
  }
  chmodSync(path, 0o600);
  let open = true;
  return () => {
    if (!open) return;
    open = false;
    server.stop(true);
    try {
      unlinkSync(path);
    } catch {}
  };
}

/** `server` answering `requestIP` with the original client's address. */
function asPeer(server: Server<unknown>, address: string): Server<unknown> {
  const ip = { address, family: address.includes(':') ? 'IPv6' : 'IPv4', port: 0 };
  return new Proxy(server, {
    get(target, key) {
      if (key === 'requestIP') return () => ip;
      const v = Reflect.get(target, key) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** Resolves once process `pid` has exited. */
export async function exited(pid: number): Promise<void> {
  while (alive(pid)) await sleep(250);
}
