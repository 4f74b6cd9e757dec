/**
 * The platform's core: configuration, settings, database, logger, data dir and the
 * lifecycle (shutdown steps). Nothing here knows the areas: their services are built on
 * top of it in src/services.ts, each with the other services it names
 * (docs/architecture.md, Layers).
 */
import { resolve } from 'node:path';
import { loadBootLayers, bootValue, type LoadOptions } from './config/load';
import { Settings } from './config/settings';
import type { Db } from './db/engine';
import { openDb } from './db/open';
import { privateDataDir } from './db/private-files';
import { migrateDir, migratePlatform } from './db/migrate';
import { createLogger, type Logger } from './log';
import { VERSION } from './version';

export interface Platform {
  readonly version: string;
  readonly settings: Settings;
  readonly db: Db;
  readonly log: Logger;
  /** Absolute data dir (embedded database, local files). */
  readonly dataDir: string;
  /**
   * Run on graceful shutdown, before the database closes, in reverse order of registration.
   * `first` steps run before all others: ending work that holds the database (open API
   * transactions hold the whole embedded engine, so any other step touching it would wait).
   * `drain` steps run as soon as a stop begins, while the requests in flight are still
   * being answered (`drain()`): refuse new long-lived work, so nothing in flight waits on it.
   */
  onShutdown(fn: () => Promise<void> | void, opts?: { first?: boolean; drain?: boolean }): void;
  /** Run the `drain` steps (once); `serve` calls it when a stop begins, `shutdown` awaits it. */
  drain(): Promise<void>;
  shutdown(): Promise<void>;
}

export interface OpenPlatformOptions extends LoadOptions {
  /** Apply operator migrations from migrations.dir (serve and migrate do). */
  migrate?: boolean;
  /** Watch database settings for changes from other instances. */
  watch?: boolean;
  /** Open even when a stored setting is refused, leaving it out (the commands that repair settings). */
  tolerateStoredSettings?: boolean;
  /** The embedded engine stopped (a PANIC): by default log it and exit with code 1. */
  onDatabaseFatal?: (err: Error) => void;
}

/**
 * The embedded engine cannot go on after a PANIC (a full disk under a WAL write, a failed
 * fsync): one line says why, and the process ends so a supervisor restarts it; the next
 * start replays the WAL (docs/operations.md, "A full disk").
 */
function exitOnFatal(log: Logger, err: Error): never {
  log.error('database stopped; exiting', { reason: err.message });
  process.exit(1);
}

export async function openPlatform(opts: OpenPlatformOptions = {}): Promise<Platform> {
  const layers = loadBootLayers(opts);
  let settings!: Settings;
  const log = createLogger(() => (settings ? settings.get('log.level') : bootValue(layers, 'log.level')));
  const dataDir = resolve(bootValue(layers, 'data.dir'));
  const repaired = privateDataDir(dataDir);
  if (repaired.fixed)
    log.warn('data dir: narrowed file modes to owner only', {
      dir: dataDir,
      count: repaired.fixed,
      examples: repaired.examples,
    });
  const pooler = bootValue(layers, 'database.pooler');
  const directUrl = pooler === 'transaction' ? bootValue(layers, 'database.direct_url') : '';
  const db = await openDb({
    url: bootValue(layers, 'database.url'),
    dataDir,
    poolMax: bootValue(layers, 'database.pool_max'),
    pooler,
    directUrl,
    detect: true,
    // Settings live in the database: until they are loaded, the boot layers answer.
    busyTimeoutMs: () =>
      settings ? settings.get('database.busy_timeout_ms') : bootValue(layers, 'database.busy_timeout_ms'),
    embedded: {
      sync: bootValue(layers, 'database.embedded_sync'),
      onFatal: opts.onDatabaseFatal ?? ((e) => exitOnFatal(log, e)),
    },
  });
  const hooks: (() => Promise<void> | void)[] = [];
  const firstHooks: (() => Promise<void> | void)[] = [];
  const drainHooks: (() => Promise<void> | void)[] = [];
  // Behind a transaction-mode pooler, migrations run past it when database.direct_url is set:
  // long DDL, outside the pooler's limits on a transaction (docs/operations.md, "Scaling out").
  let migrator: Db | undefined;
  try {
    migrator = directUrl ? await openDb({ url: directUrl, dataDir, poolMax: 1 }) : db;
    await migratePlatform(migrator);
    settings = new Settings(layers, db, opts.tolerateStoredSettings);
    await settings.load();
    if (opts.migrate !== false) {
      const applied = await migrateDir(migrator, settings.get('migrations.dir'), {
        table: 'basalt.schema_migrations',
        schema: settings.get('database.data_schema'),
      });
      if (applied.length) log.info('applied migrations', { files: applied });
    }
    if (migrator !== db) await migrator.close();
    if (opts.watch) await settings.watch();
  } catch (e) {
    if (migrator && migrator !== db) await migrator.close().catch(() => {}); // the start-up error is the one reported
    await db.close().catch(() => {}); // start-up already failed: that error is the one reported
    throw e;
  }
  let closing: Promise<void> | undefined;
  let draining: Promise<void> | undefined;
  const run = async (fns: (() => Promise<void> | void)[]) => {
    for (const fn of fns) {
      try {
        await fn();
      } catch (e) {
        log.error('shutdown step failed', { cause: e });
      }
    }
  };
  const platform: Platform = {
    version: VERSION,
    settings,
    db,
    log,
    dataDir,
    onShutdown: (fn, opts) => void (opts?.drain ? drainHooks : opts?.first ? firstHooks : hooks).push(fn),
    // Drain steps run side by side: one that waits for the database (the realtime reader,
    // behind an open API transaction on the embedded engine) must not hold up the step
    // that ends that transaction.
    drain: () => (draining ??= Promise.all(drainHooks.map((fn) => run([fn]))).then(() => {})),
    shutdown: () =>
      (closing ??= (async () => {
        await platform.drain();
        await run([...firstHooks.reverse(), ...hooks.reverse()]);
        await settings.close();
        await db.close();
      })()),
  };
  return platform;
}
