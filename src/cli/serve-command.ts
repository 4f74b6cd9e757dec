import { openBasalt } from '../services';
import { listen, type Running } from '../serve';
import type { GlobalFlags, RunInProcess } from './command';
import { startControlSocket } from './control-socket';
import { cliCommand, startBanner } from './start-banner';
import { guardProcess } from '../process-guard';

/** `basalt serve`: open, listen, and shut down gracefully on SIGTERM/SIGINT. */
export async function serveCommand(globals: GlobalFlags, runInProcess: RunInProcess): Promise<number> {
  // The handlers come first, before anything is opened: a stop asked while the server
  // starts is a graceful stop as soon as what is open can be closed, never a kill.
  let signal: string | undefined;
  const stopAsked = new Promise<string>((resolve) => {
    const on = (s: string) => () => resolve((signal ??= s));
    process.once('SIGTERM', on('SIGTERM'));
    process.once('SIGINT', on('SIGINT'));
  });
  const platform = await openBasalt({
    configFile: globals.config,
    flags: { 'data.dir|--data': globals.data, ...(globals.dev ? { 'log.level|--dev': 'debug' } : {}) },
    migrate: true,
    watch: true,
  });
  // An error nothing caught: logged, survived when it is the database's, else exit 1 (src/process-guard.ts).
  guardProcess(platform.log);
  if (signal) {
    platform.log.info('shutting down', { signal, while: 'starting' });
    await platform.shutdown();
    return 0;
  }
  let running: Running;
  try {
    running = await listen(platform);
  } catch (e) {
    await platform.shutdown();
    throw e;
  }
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
  // Embedded: other `basalt` commands run inside this process over the management socket.
  // (Background workers, the backup schedule among them, are started by listen(): src/workers.ts.)
  if (platform.db.kind === 'embedded') {
    const close = startControlSocket(platform.dataDir, (argv, io) => runInProcess(argv, io, platform), platform.log);
    if (close) platform.onShutdown(close);
  }
  const stopping = await stopAsked;
  platform.log.info('shutting down', { signal: stopping });
  try {
    await running.stop();
    return 0;
  } catch (e) {
    platform.log.error('shutdown failed', { cause: e });
    return 1;
  }
}
