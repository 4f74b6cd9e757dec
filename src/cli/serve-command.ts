import { openBasalt, type Basalt } from '../services';
import { listen, type Running } from '../serve';
import type { GlobalFlags, RunInProcess } from './command';
import { askHandover, startControlSocket } from './control-socket';
import { cliCommand, startBanner } from './start-banner';
import { guardProcess } from '../process-guard';
import { alive, DataDirLockedError, lockFileExists } from '../db/datadir-lock';
import { bootValue, loadBootLayers } from '../config/load';
import type { OpenPlatformOptions } from '../platform';
import { nextSocketPath, removeStaleNextSockets, type HandoverAsk } from '../handover';
import { runPendingRestore } from '../modules/backup/restore-request';

/** `basalt serve`: open, listen, and shut down gracefully on SIGTERM/SIGINT, or hand over to a newer one. */
export async function serveCommand(globals: GlobalFlags, runInProcess: RunInProcess): Promise<number> {
  // The handlers come first, before anything is opened: a stop asked while the server
  // starts is a graceful stop as soon as what is open can be closed, never a kill.
  let signal: string | undefined;
  let onHandover: (ask: HandoverAsk) => void = () => {};
  const stopAsked = new Promise<string | HandoverAsk>((resolve) => {
    const on = (s: string) => () => resolve((signal ??= s));
    process.once('SIGTERM', on('SIGTERM'));
    process.once('SIGINT', on('SIGINT'));
    onHandover = resolve;
  });
  const opts: OpenPlatformOptions = {
    configFile: globals.config,
    flags: { 'data.dir|--data': globals.data, ...(globals.dev ? { 'log.level|--dev': 'debug' } : {}) },
    migrate: true,
    watch: true,
  };
  // A point-in-time restore asked for from the panel runs now, before the data dir is opened
  // (while another instance holds it, the request waits for a start that finds it free).
  await runPendingRestore(opts, (line) => console.error(line));
  // Another `basalt serve` on this data dir and port is taken over (docs/operations.md, "Upgrading").
  let previous: number | undefined;
  let platform: Basalt;
  try {
    platform = await openBasalt(opts);
  } catch (e) {
    if (!(e instanceof DataDirLockedError && e.dir)) throw e;
    // Embedded: the old process closes the engine as it hands over; this one opens it then,
    // its WebAssembly compiled meanwhile.
    void import('../db/embedded').then((m) => m.compileEngine()).catch(() => {}); // a failure is opening's to report
    const layers = loadBootLayers(opts);
    const answer = await askHandover(e.dir, {
      ...ports((key) => bootValue(layers, key)),
      pid: process.pid,
      next: nextSocketPath(e.dir),
    });
    if (!answer) throw e;
    if (!answer.accepted) throw new DataDirLockedError(`${e.message} (no takeover: ${answer.reason})`);
    previous = answer.pid;
    platform = await openOnceFree(opts, e.dir, answer.pid, 2 * answer.shutdownMs + answer.waitMs);
  }
  // An error nothing caught: logged, survived when it is the database's, else exit 1 (src/process-guard.ts).
  guardProcess(platform.log);
  if (signal) {
    platform.log.info('shutting down', { signal, while: 'starting' });
    await platform.shutdown();
    return 0;
  }
  // External: no lock says another instance serves this data dir; its management socket does.
  if (previous === undefined && platform.db.kind === 'external') {
    const answer = await askHandover(platform.dataDir, {
      ...ports((key) => platform.settings.get(key)),
      pid: process.pid,
      next: nextSocketPath(platform.dataDir),
    });
    if (answer?.accepted) previous = answer.pid;
  }
  let running: Running;
  try {
    running = await listen(
      platform,
      [],
      previous === undefined ? {} : { takeover: { next: nextSocketPath(platform.dataDir), from: previous } },
    );
  } catch (e) {
    await platform.shutdown();
    throw e;
  }
  if (previous !== undefined) platform.log.info('took over', { from_pid: previous });
  removeStaleNextSockets(platform.dataDir);
  // Plain words beside the JSON log: where things are and how to get a key (src/cli/start-banner.ts).
  console.error(startBanner(platform, running.main, running.public));
  // Besides the log line: a plain line an operator sees whatever the log level or format.
  if (running.setupLink)
    console.error(
      `\nNo administrator yet. Create the first one within 30 minutes at:\n  ${running.setupLink}\n(or run: basalt admin create --email E --password P)\n`,
    );
  // From a checkout `basalt` is not on the PATH: say what to type instead.
  if (running.setupLink && cliCommand().startsWith('npx'))
    console.error(`(from this checkout: ${cliCommand()} admin create --email E --password P)\n`);
  // Other `basalt` commands run inside this process over the management socket (embedded), and a
  // newer `basalt serve` asks there to take over (both engines). On external PostgreSQL another
  // instance may own the socket of a shared data dir: it is left to it.
  // (Background workers, the backup schedule among them, are started by listen(): src/workers.ts.)
  if (platform.db.kind === 'embedded' || previous !== undefined || !(await askHandover(platform.dataDir, PING))) {
    const close = startControlSocket(
      platform.dataDir,
      (argv, io) => runInProcess(argv, io, platform),
      platform.log,
      (ask) => {
        if (!ask.pid) return { accepted: false, reason: 'no process asked' };
        const reason = running.refuseHandover(ask);
        if (reason) return { accepted: false, reason };
        onHandover(ask);
        return {
          accepted: true,
          pid: process.pid,
          waitMs: platform.settings.get('web.takeover_wait_ms'),
          shutdownMs: platform.settings.get('web.shutdown_timeout_ms'),
        };
      },
    );
    if (close) platform.onShutdown(close);
  }
  const stopping = await stopAsked;
  if (typeof stopping !== 'string') {
    platform.log.info('shutting down', { handover_to: stopping.pid });
    try {
      return (await running.handOver(stopping)) ? 0 : 1;
    } catch (e) {
      platform.log.error('handover failed', { cause: e });
      return 1;
    }
  }
  platform.log.info('shutting down', { signal: stopping });
  try {
    await running.stop();
    return 0;
  } catch (e) {
    platform.log.error('shutdown failed', { cause: e });
    return 1;
  }
}

/** Asks nothing (no pid): whether a live process answers on the management socket. */
const PING: HandoverAsk = { pid: 0, port: -1, publicPort: -1, next: '' };

function ports(get: (key: 'web.port' | 'web.public_port' | 'web.public_api_separate') => unknown) {
  return {
    port: Number(get('web.port')),
    publicPort: get('web.public_api_separate') ? Number(get('web.public_port')) : 0,
  };
}

/** Open the platform once the process `holder`, handing over, has closed the embedded engine (at most `ms`). */
async function openOnceFree(opts: OpenPlatformOptions, dir: string, holder: number, ms: number): Promise<Basalt> {
  const end = performance.now() + ms;
  for (;;) {
    // Opening reads the config and walks the data dir: try again only once the lock file is gone.
    while (lockFileExists(dir) && alive(holder) && performance.now() < end) await Bun.sleep(5);
    try {
      return await openBasalt(opts);
    } catch (e) {
      if (!(e instanceof DataDirLockedError) || performance.now() > end) throw e;
    }
  }
}
