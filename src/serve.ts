import type { Server } from 'bun';
import { connect } from 'node:net';
import type { Basalt } from './services';
import { areas, createApp, type ExtraModules } from './app';
import { ConfigError, checkCombination } from './config/validate';
import { recordListeners } from './modules/runtime-config/service';
import { issueSetupLink } from './modules/admin/tasks';
import { startWorkers } from './workers';
import { within } from './util/timeout';
import { createHandler } from './http/server';
import { Errors } from './http/errors';
import { exited, HandoverGate, migratesQueuedConnections, serveForwarded, type HandoverAsk } from './handover';

// Listeners bind with SO_REUSEPORT, so that a new `basalt serve` can take this one over on
// the same port (src/handover.ts). Two unrelated processes could then share a port without
// an error (Bun also shares one once the embedded engine's WebAssembly runtime is loaded,
// whatever reusePort says), so, except in a takeover, where sharing the port for a moment is
// the point: before binding, a port that accepts a connection is in use (`acceptsOn`); after,
// the listener proves it answers its own port (`assertOwned`), for a process that bound it
// in between.
const PROBE_HEADER = 'x-basalt-listener-check';
const probeToken = crypto.randomUUID();
const PROBES = 8;

function checked(handler: (req: Request, server: Server<unknown>) => Promise<Response>) {
  return (req: Request, server: Server<unknown>) =>
    req.headers.get(PROBE_HEADER) === probeToken ? Promise.resolve(new Response(probeToken)) : handler(req, server);
}

/** The address a probe of a listener on `hostname` connects to. */
function probeHost(hostname: string | undefined): string {
  if (hostname === '0.0.0.0' || !hostname) return '127.0.0.1';
  if (hostname === '::') return '::1';
  return hostname;
}

const inUse = (key: string, port: number, hostname: string | undefined) =>
  new ConfigError(
    `${key}: port ${port} on ${hostname} is already in use; stop the other process or choose another port`,
  );

/**
 * Whether something accepts TCP connections on the port now. Asked before binding, so only
 * another process can answer: unlike the probes after binding, it cannot reach our own
 * listener by chance (the kernel spreads connections between the sockets sharing a port).
 */
function acceptsOn(hostname: string, port: number): Promise<boolean> {
  if (port === 0) return Promise.resolve(false);
  return new Promise((resolve) => {
    const socket = connect({ host: probeHost(hostname), port });
    const done = (accepted: boolean) => {
      socket.destroy();
      resolve(accepted);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function assertOwned(server: Server<unknown>, key: string): Promise<void> {
  const host = probeHost(server.hostname);
  const url = host.includes(':') ? `[${host}]` : host;
  // When both sockets hold the port the kernel spreads new connections between them, so one
  // answer can come from our own listener by chance: probe several fresh connections.
  let owned = true;
  for (let i = 0; i < PROBES && owned; i++) {
    const answer = await fetch(`http://${url}:${server.port}/`, {
      headers: { [PROBE_HEADER]: probeToken, connection: 'close' },
    })
      .then((r) => r.text())
      .catch(() => '');
    owned = answer === probeToken;
  }
  if (!owned) throw inUse(key, server.port ?? 0, server.hostname);
}

export interface Running {
  main: Server<unknown>;
  public?: Server<unknown>;
  /** The one-time link that creates the first administrator, when none existed at start (docs/admin.md). */
  setupLink?: string;
  /**
   * Stop accepting, finish in-flight requests (cut after web.shutdown_timeout_ms), run
   * shutdown hooks, close the database.
   */
  stop(): Promise<void>;
  /** Why `ask` cannot take this process over (another port), or undefined when it can. */
  refuseHandover(ask: HandoverAsk): string | undefined;
  /**
   * Hand over to the process that asked (src/handover.ts): hold new requests, finish the
   * ones in flight, run the shutdown steps and close the database, forward what arrives to
   * the new process, close the listeners once no request comes. False when the new process
   * never answered (the held requests were refused).
   */
  handOver(ask: HandoverAsk): Promise<boolean>;
}

export interface ListenOptions {
  /**
   * This process takes over process `from` on the same port: share the port, and serve the
   * private socket `next` for the requests `from` forwards until it exits.
   */
  takeover?: { next: string; from: number };
}

/** Listen on one or two ports (README.md, What it serves). Port 0 picks a free port (tests). */
export async function listen(p: Basalt, extra: ExtraModules = [], opts: ListenOptions = {}): Promise<Running> {
  checkCombination((key) => p.settings.get(key));
  // Extensions are scanned and set up once per platform; their routes mount in the areas of their prefixes.
  const extensions = await p.services.extensions.load(areas);
  const built = await createApp(p, { extensions, extra });
  const hostname = p.settings.get('web.host');
  const open = (port: number, key: string, fetch: (req: Request, server: Server<unknown>) => Promise<Response>) => {
    try {
      return Bun.serve({
        port,
        hostname,
        fetch,
        maxRequestBodySize: 10 * 1024 * 1024 * 1024,
        development: false,
        idleTimeout: 60,
        reusePort: true,
      });
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'EADDRINUSE') throw inUse(key, port, hostname);
      if (code === 'EADDRNOTAVAIL')
        throw new ConfigError(`web.host: cannot bind to ${hostname} (no such address on this machine)`);
      if (code === 'EACCES') throw new ConfigError(`${key}: not allowed to bind port ${port}; use a port above 1023`);
      throw e;
    }
  };
  // A request that arrives while this process hands over and finds no new process within
  // web.takeover_wait_ms: 503 restarting in its area's envelope, never run.
  const refusal = createHandler({
    settings: p.settings,
    log: p.log,
    areas,
    handle: () => Promise.reject(Errors.restarting(Math.ceil(p.settings.get('web.takeover_wait_ms') / 1000))),
  });
  const gate = new HandoverGate(() => refusal);
  const owned = opts.takeover ? async () => {} : assertOwned;
  const free = async (port: number, key: string) => {
    if (!opts.takeover && (await acceptsOn(hostname, port))) throw inUse(key, port, hostname);
  };
  await free(p.settings.get('web.port'), 'web.port');
  if (built.publicHandler) await free(p.settings.get('web.public_port'), 'web.public_port');
  const main = open(p.settings.get('web.port'), 'web.port', checked(gate.wrap('main', built.mainHandler)));
  let pub: Server<unknown> | undefined;
  let closeForwarded: (() => void) | undefined;
  try {
    await owned(main, 'web.port');
    if (built.publicHandler) {
      pub = open(
        p.settings.get('web.public_port'),
        'web.public_port',
        checked(gate.wrap('public', built.publicHandler)),
      );
      await owned(pub, 'web.public_port');
    }
    if (opts.takeover) {
      closeForwarded = serveForwarded(opts.takeover.next, {
        main: gate.wrap('main', built.mainHandler),
        public: built.publicHandler && gate.wrap('public', built.publicHandler),
      });
      p.onShutdown(closeForwarded);
      const from = opts.takeover.from;
      void exited(from).then(() => {
        p.log.info('previous instance exited', { pid: from });
        closeForwarded?.();
      });
    }
  } catch (e) {
    main.stop(true);
    pub?.stop(true);
    closeForwarded?.();
    throw e;
  }
  recordListeners(p, main.url, pub?.url);
  p.log.info('listening', {
    main: main.url.href,
    public: pub?.url.href,
    database: p.db.describe,
    version: p.version,
    ...(p.db.pooling && {
      pooler: p.db.pooling.pooler,
      notifications: p.db.pooling.notifications,
      pooler_detected: p.db.pooling.detected,
    }),
  });
  let setupLink: string | undefined;
  try {
    // The background workers of a serving process, all in one list (src/workers.ts).
    await startWorkers(p);
    setupLink = await issueSetupLink(
      p,
      p.settings.get('web.main_base_url') ||
        main.url.origin.replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//127.0.0.1:'),
    );
  } catch (e) {
    main.stop(true);
    pub?.stop(true);
    throw e;
  }
  const servers = pub ? [main, pub] : [main];
  // stop(false) waits for in-flight requests; one that hangs must not keep the process alive
  // forever, so after web.shutdown_timeout_ms the rest are cut.
  const closeListeners = async (deadline: number) => {
    if (!(await within(Promise.all(servers.map((s) => s.stop(false))), deadline))) {
      const cut = servers.reduce((n, s) => n + s.pendingRequests, 0);
      p.log.warn('shutdown deadline passed; closing in-flight requests', { deadline_ms: deadline, requests: cut });
      await Promise.all(servers.map((s) => s.stop(true)));
    }
  };
  // The shutdown steps get the same allowance: a stuck step fails the stop (exit 1) rather than hanging it.
  const shutdown = async (deadline: number) => {
    if (!(await within(p.shutdown(), deadline)))
      throw new Error(`shutdown steps did not finish within ${deadline} ms (web.shutdown_timeout_ms)`);
  };
  let stopping: Promise<void> | undefined;
  let handing: Promise<boolean> | undefined;
  return {
    main,
    public: pub,
    setupLink,
    stop: () =>
      (stopping ??= (async () => {
        const deadline = p.settings.get('web.shutdown_timeout_ms');
        // Meanwhile the drain steps refuse new long-lived work (API transactions).
        void p.drain();
        await closeListeners(deadline);
        await shutdown(deadline);
      })()),
    refuseHandover: (ask) => {
      if (stopping || handing) return 'this instance is already stopping';
      if (ask.port !== main.port || ask.publicPort !== (pub?.port ?? 0))
        return `this instance serves port ${main.port}${pub ? ` and ${pub.port}` : ''}, the new one asks for ${ask.port}${ask.publicPort ? ` and ${ask.publicPort}` : ''}: a takeover keeps the ports`;
      return undefined;
    },
    handOver: (ask) =>
      (handing ??= (async () => {
        const deadline = p.settings.get('web.shutdown_timeout_ms');
        const waitMs = p.settings.get('web.takeover_wait_ms');
        const started = performance.now();
        p.log.info('handing over', { to_pid: ask.pid });
        // The new process waits for the engine this process closes below: it gets that long, then waitMs.
        const ready = gate.hold(ask, waitMs, started + 2 * deadline + waitMs);
        void p.drain();
        const end = started + deadline;
        while (gate.direct(servers) > 0 && performance.now() < end) await Bun.sleep(5);
        const drainedMs = Math.round(performance.now() - started);
        if (gate.direct(servers) > 0)
          p.log.warn('handover: requests still running at web.shutdown_timeout_ms; closing the database under them', {
            requests: gate.direct(servers),
          });
        await shutdown(deadline);
        const released = Math.round(performance.now() - started);
        const answered = await ready;
        const readyMs = Math.round(performance.now() - started);
        if (!answered)
          p.log.error('handover: the new process never served; held requests were refused', { to_pid: ask.pid });
        // Clients still reaching this listener are forwarded; once none has for a moment, close it.
        if (answered) await gate.quiet();
        await closeListeners(deadline);
        p.log.info('handed over', {
          to_pid: ask.pid,
          drained_ms: drainedMs,
          database_released_ms: released,
          next_ready_ms: readyMs,
          closed_ms: Math.round(performance.now() - started),
          // false: any connection queued on the listeners as they closed was reset (docs/operations.md, "Upgrading").
          tcp_migrate_req: migratesQueuedConnections(),
          ...gate.stats,
        });
        return answered;
      })()),
  };
}
