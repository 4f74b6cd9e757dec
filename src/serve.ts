import type { Server } from 'bun';
import type { Basalt } from './services';
import { areas, createApp, type ExtraModules } from './app';
import { ConfigError, checkCombination } from './config/validate';
import { recordListeners } from './modules/runtime-config/service';
import { issueSetupLink } from './modules/admin/tasks';
import { startWorkers } from './workers';
import { within } from './util/timeout';

// Once the embedded engine's WebAssembly runtime is loaded, Bun.serve without an explicit
// reusePort binds a port another process holds (SO_REUSEPORT) and the kernel then hands
// this process the connections, the probe's included. So listeners ask for an exclusive
// port, and each still proves it answers its own port.
const PROBE_HEADER = 'x-basalt-listener-check';
const probeToken = crypto.randomUUID();
const PROBES = 8;

function checked(handler: (req: Request, server: Server<unknown>) => Promise<Response>) {
  return (req: Request, server: Server<unknown>) =>
    req.headers.get(PROBE_HEADER) === probeToken ? Promise.resolve(new Response(probeToken)) : handler(req, server);
}

async function assertOwned(server: Server<unknown>, key: string): Promise<void> {
  const host =
    server.hostname === '0.0.0.0' || !server.hostname
      ? '127.0.0.1'
      : server.hostname === '::'
        ? '[::1]'
        : server.hostname.includes(':')
          ? `[${server.hostname}]`
          : server.hostname;
  // When both sockets hold the port the kernel spreads new connections between them, so one
  // answer can come from our own listener by chance: probe several fresh connections.
  let owned = true;
  for (let i = 0; i < PROBES && owned; i++) {
    const answer = await fetch(`http://${host}:${server.port}/`, {
      headers: { [PROBE_HEADER]: probeToken, connection: 'close' },
    })
      .then((r) => r.text())
      .catch(() => '');
    owned = answer === probeToken;
  }
  if (!owned) {
    throw new ConfigError(
      `${key}: port ${server.port} on ${server.hostname} is already in use; stop the other process or choose another port`,
    );
  }
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
}

/** Listen on one or two ports (README.md, What it serves). Port 0 picks a free port (tests). */
export async function listen(p: Basalt, extra: ExtraModules = []): Promise<Running> {
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
        reusePort: false,
      });
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'EADDRINUSE')
        throw new ConfigError(
          `${key}: port ${port} on ${hostname} is already in use; stop the other process or choose another port`,
        );
      if (code === 'EADDRNOTAVAIL')
        throw new ConfigError(`web.host: cannot bind to ${hostname} (no such address on this machine)`);
      if (code === 'EACCES') throw new ConfigError(`${key}: not allowed to bind port ${port}; use a port above 1023`);
      throw e;
    }
  };
  const main = open(p.settings.get('web.port'), 'web.port', checked(built.mainHandler));
  let pub: Server<unknown> | undefined;
  try {
    await assertOwned(main, 'web.port');
    if (built.publicHandler) {
      pub = open(p.settings.get('web.public_port'), 'web.public_port', checked(built.publicHandler));
      await assertOwned(pub, 'web.public_port');
    }
  } catch (e) {
    main.stop(true);
    pub?.stop(true);
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
  let stopping: Promise<void> | undefined;
  return {
    main,
    public: pub,
    setupLink,
    stop: () =>
      (stopping ??= (async () => {
        const servers = pub ? [main, pub] : [main];
        // stop(false) waits for in-flight requests; one that hangs must not keep the
        // process alive forever, so after web.shutdown_timeout_ms the rest are cut.
        const deadline = p.settings.get('web.shutdown_timeout_ms');
        // Meanwhile the drain steps refuse new long-lived work (API transactions).
        void p.drain();
        const drained = await within(Promise.all(servers.map((s) => s.stop(false))), deadline);
        if (!drained) {
          const cut = servers.reduce((n, s) => n + s.pendingRequests, 0);
          p.log.warn('shutdown deadline passed; closing in-flight requests', { deadline_ms: deadline, requests: cut });
          await Promise.all(servers.map((s) => s.stop(true)));
        }
        // The shutdown steps get the same allowance: a stuck step fails the stop (exit 1) rather than hanging it.
        if (!(await within(p.shutdown(), deadline)))
          throw new Error(`shutdown steps did not finish within ${deadline} ms (web.shutdown_timeout_ms)`);
      })()),
  };
}
