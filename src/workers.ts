/**
 * The background work of a serving process, in one list. `listen()` (src/serve.ts) starts
 * each worker once the listeners answer, in this order, and each one's stop runs at
 * shutdown (in reverse order, before the database closes). So `basalt serve` and every test
 * that goes through `listen()` run the same workers; one-shot commands (`basalt keys …`)
 * run none.
 *
 * Adding a worker: a `start(p)` that begins the work and returns the function that ends it
 * (waiting for a run under way), and one entry below; `runs` when only some processes run
 * it. docs/operations.md ("Background workers") lists them for operators.
 *
 * Not here: the settings watch (part of opening the platform: a setting changed elsewhere
 * must be live before the first request), the caches' LISTEN subscriptions of the key and
 * session services (part of those services being correct), and the management socket
 * (src/cli/serve-command.ts: only `basalt serve` takes commands).
 */
import type { Basalt } from './services';
import { startAdminHousekeeping } from './modules/admin/tasks';
import { startBackupSchedule } from './modules/backup/schedule';
import { startWalArchiving } from './modules/backup/wal-worker';
import { startAuthHousekeeping } from './modules/auth/service';

type Stop = () => Promise<void> | void;

export interface Worker {
  name: string;
  /** Whether this process runs the worker (default: every serving process). */
  runs?(p: Basalt): boolean;
  /** Begin; resolves to the function that ends it. */
  start(p: Basalt): Stop | Promise<Stop>;
}

export const WORKERS: Worker[] = [
  {
    // Delivery from the queue in every serving process (docs/mail.md), and the hourly purge of old jobs.
    name: 'mail delivery and retention',
    start(p) {
      void p.services.mail.startWorker().catch((e) => p.log.error('mail worker failed to start', { cause: e }));
      // Ended by the mail service's own shutdown step, which also settles sends in flight.
      return () => {};
    },
  },
  {
    // The realtime reader feeds this instance's event streams (docs/realtime.md).
    name: 'realtime reader',
    start(p) {
      void p.services.realtime.start().catch((e) => p.log.error('realtime reader failed to start', { cause: e }));
      // Ended by the realtime service's own drain step, as soon as a stop begins.
      return () => {};
    },
  },
  {
    // Extensions' jobs, cron entries and hooks (docs/extensions.md); after their setup, which defined them.
    name: 'jobs, cron and hooks',
    start(p) {
      void p.services.jobs.start().catch((e) => p.log.error('jobs, cron and hooks failed to start', { cause: e }));
      return () => p.services.jobs.stop();
    },
  },
  {
    // Expired sessions, tokens, counters, codes and sign-in flows of Public Auth (docs/auth.md).
    name: 'auth housekeeping',
    start: (p) => startAuthHousekeeping(p.services.auth, p.log),
  },
  {
    // The dashboard's "instances seen", audit retention and ended admin sessions (docs/admin.md).
    name: 'instance heartbeat and admin housekeeping',
    start: startAdminHousekeeping,
  },
  {
    // Request log rows past logs.retention_days, at start and hourly (docs/logs.md).
    name: 'request log retention',
    start: (p) => p.services.logs.startRetention(),
  },
  {
    // Scheduled backups (backup.schedule, docs/backup.md): the embedded engine's data dir is this process's.
    name: 'backup schedule',
    runs: (p) => p.db.kind === 'embedded',
    start: startBackupSchedule,
  },
  {
    // WAL archiving for point-in-time restore (backup.pitr_days, docs/backup.md); stopped before the engine closes.
    name: 'WAL archiving',
    runs: (p) => p.db.kind === 'embedded',
    start: startWalArchiving,
  },
];

/** Start every worker this process runs; a worker that fails to start is logged, the others run. */
export async function startWorkers(p: Basalt, workers: Worker[] = WORKERS): Promise<void> {
  for (const w of workers) {
    if (w.runs && !w.runs(p)) continue;
    try {
      p.onShutdown(await w.start(p));
    } catch (e) {
      p.log.error('background worker failed to start', { worker: w.name, cause: e });
    }
  }
}
