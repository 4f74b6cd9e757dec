import { openPlatform } from '../platform';
import { listen, type Running } from '../serve';
import type { GlobalFlags } from './command';
import { startControlSocket } from './control-socket';
import { cliCommand, startBanner } from './start-banner';

/** `basalt serve`: open, listen, and shut down gracefully on SIGTERM/SIGINT. */
export async function serveCommand(globals: GlobalFlags): Promise<number> {
  const platform = await openPlatform({
    configFile: globals.config,
    flags: { 'data.dir|--data': globals.data, ...(globals.dev ? { 'log.level|--dev': 'debug' } : {}) },
    migrate: true,
    watch: true,
  });
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
  if (platform.db.kind === 'embedded') {
    const { runInProcess } = await import('../main');
    const close = startControlSocket(platform.dataDir, (argv, io) => runInProcess(argv, io, platform), platform.log);
    if (close) platform.onShutdown(close);
    // Scheduled backups (backup.schedule, docs/backup.md).
    const { startBackupSchedule } = await import('../modules/backup/schedule');
    platform.onShutdown(startBackupSchedule(platform));
  }
  return await new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      platform.log.info('shutting down', { signal });
      running.stop().then(
        () => resolve(0),
        (e) => {
          platform.log.error('shutdown failed', { cause: e });
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
