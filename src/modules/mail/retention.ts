/**
 * Retention (docs/mail.md, "Retention"): hourly, and at start, each instance serving HTTP
 * deletes finished jobs older than `mail.job_retention_days` (at least a day, so a job
 * outlives the 24 h of its idempotency key). Queued and failed jobs are never purged.
 */
import type { Queryable } from '../../db/engine';
import type { Settings } from '../../config/settings';
import type { Logger } from '../../log';

const PURGE_EVERY_MS = 60 * 60 * 1000;

/** Delete finished jobs older than the retention. */
export async function purge(q: Queryable, retentionDays: number): Promise<{ jobs: number }> {
  const jobs = await q.query(
    `DELETE FROM basalt.mail_jobs WHERE state IN ('sent', 'dead', 'cancelled') AND updated_at < now() - ($1::int * interval '1 day')`,
    [retentionDays],
  );
  return { jobs: jobs.rowCount };
}

export class MailRetention {
  private timer?: Timer;
  private running?: Promise<unknown>;

  constructor(private readonly d: { db: Queryable; settings: Settings; log: Logger }) {}

  /** Purge now and then hourly (once; later calls do nothing). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.purgeNow(), PURGE_EVERY_MS);
    void this.purgeNow();
  }

  /** Undefined when the purge failed (logged). */
  purgeNow(): Promise<{ jobs: number } | undefined> {
    const run = (async () => {
      try {
        const r = await purge(this.d.db, this.d.settings.get('mail.job_retention_days'));
        if (r.jobs) this.d.log.info('mail jobs purged', r);
        return r;
      } catch (e) {
        this.d.log.warn('mail purge failed', { cause: e });
        return undefined;
      }
    })();
    this.running = run;
    return run;
  }

  /** No more purges; waits for one in progress, so it never runs against a closed database. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
