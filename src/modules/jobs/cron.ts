/**
 * Cron (docs/extensions.md, "Cron"): each entry's slots come from croner; each slot is taken
 * once across all instances by a compare-and-set on the entry's `last_slot` together with a
 * unique record per entry and slot (basalt.cron_runs), and its run is a job (kind `cron`, the
 * slot its idempotency key) enqueued in the same transaction. After downtime only the latest
 * missed slot runs; older missed ones are recorded as skipped.
 */
import { Cron } from 'croner';
import type { Db, Queryable } from '../../db/engine';
import type { Logger } from '../../log';

const TICK_MS = 1000;
/** At most this many skipped slots are recorded one by one after downtime (the rest are only skipped). */
const SKIPPED_RECORDED = 100;

export interface CronDef {
  extension: string;
  name: string;
  expression: string;
  timezone: string;
  schedule: Cron;
}

/** The schedule of an expression (five fields, or six with seconds first), or the reason it is refused. */
export function parseSchedule(expression: string, timezone: string): Cron {
  const fields = expression.trim().split(/\s+/).length;
  if (fields !== 5 && fields !== 6)
    throw new Error(
      `'${expression}' has ${fields} fields: use five (minute hour day month weekday), or six with seconds first`,
    );
  return new Cron(expression, { timezone, paused: true, mode: '5-or-6-parts' });
}

/** The latest slot at or before `now`, if the schedule has one. */
export function latestSlot(c: Cron, now: Date): Date | undefined {
  return c.previousRuns(1, new Date(now.getTime() + 1))[0];
}

export interface CronStatus {
  extension: string;
  name: string;
  expression: string;
  timezone: string;
  last_slot: Date;
  last_job: string | null;
  last_state: string | null;
}

export async function cronStatuses(q: Queryable): Promise<CronStatus[]> {
  const { rows } = await q.query<CronStatus>(
    `SELECT e.extension, e.name, e.expression, e.timezone, e.last_slot, r.job_id AS last_job, j.state AS last_state
       FROM basalt.cron_entries e
       LEFT JOIN LATERAL (SELECT job_id FROM basalt.cron_runs r
                           WHERE r.extension = e.extension AND r.name = e.name AND NOT r.skipped
                           ORDER BY r.slot DESC LIMIT 1) r ON true
       LEFT JOIN basalt.jobs j ON j.id = r.job_id
      ORDER BY e.extension, e.name`,
  );
  return rows;
}

export class CronScheduler {
  private timer?: Timer;
  private stopping = false;
  private busy?: Promise<void>;
  /** The last slot taken of each entry, as this instance last saw it. */
  private readonly last = new Map<string, number>();

  constructor(
    private readonly d: {
      db: Db;
      log: Logger;
      entries: () => CronDef[];
      /** Enqueue the run of `slot` in `tx`; returns the job id. */
      enqueue(tx: Queryable, c: CronDef, slot: Date): Promise<string>;
    },
  ) {}

  async start(): Promise<void> {
    const entries = this.d.entries();
    if (!entries.length) return;
    const now = new Date();
    for (const c of entries) {
      // A new entry starts with the latest slot already past: its first run is the next slot.
      const first = latestSlot(c.schedule, now) ?? now;
      const { rows } = await this.d.db.query<{ last_slot: Date }>(
        `INSERT INTO basalt.cron_entries (extension, name, expression, timezone, last_slot) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (extension, name) DO UPDATE SET expression = EXCLUDED.expression, timezone = EXCLUDED.timezone, seen_at = now()
         RETURNING last_slot`,
        [c.extension, c.name, c.expression, c.timezone, first.toISOString()],
      );
      this.last.set(`${c.extension}/${c.name}`, rows[0]!.last_slot.getTime());
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.stopping) return;
    this.timer = setTimeout(
      () => {
        this.busy = this.tick()
          .catch((e) => this.d.log.warn('cron: taking a slot failed; tried again', { cause: e }))
          .finally(() => {
            this.busy = undefined;
            this.schedule();
          });
      },
      TICK_MS - (Date.now() % TICK_MS) + 5,
    );
  }

  private async tick(): Promise<void> {
    const now = new Date();
    for (const c of this.d.entries()) {
      if (this.stopping) return;
      const key = `${c.extension}/${c.name}`;
      const slot = latestSlot(c.schedule, now);
      const known = this.last.get(key);
      if (!slot || known === undefined || slot.getTime() <= known) continue;
      await this.take(c, key, slot);
    }
  }

  /** Take `slot` for this entry unless another instance did: the skipped slots and the run, in one transaction. */
  private async take(c: CronDef, key: string, slot: Date): Promise<void> {
    const taken = await this.d.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ last_slot: Date }>(
        'SELECT last_slot FROM basalt.cron_entries WHERE extension = $1 AND name = $2 FOR UPDATE',
        [c.extension, c.name],
      );
      const last = rows[0]?.last_slot;
      if (!last || last.getTime() >= slot.getTime()) return last?.getTime() ?? slot.getTime();
      const skipped: Date[] = [];
      for (let s = c.schedule.nextRun(last); s && s.getTime() < slot.getTime(); s = c.schedule.nextRun(s)) {
        skipped.push(s);
        if (skipped.length >= SKIPPED_RECORDED) break;
      }
      if (skipped.length)
        await tx.query(
          `INSERT INTO basalt.cron_runs (extension, name, slot, skipped)
           SELECT $1, $2, s, true FROM unnest($3::timestamptz[]) AS s ON CONFLICT DO NOTHING`,
          [c.extension, c.name, skipped.map((s) => s.toISOString())],
        );
      const job = await this.d.enqueue(tx, c, slot);
      await tx.query('INSERT INTO basalt.cron_runs (extension, name, slot, job_id) VALUES ($1, $2, $3, $4)', [
        c.extension,
        c.name,
        slot.toISOString(),
        job,
      ]);
      await tx.query('UPDATE basalt.cron_entries SET last_slot = $3 WHERE extension = $1 AND name = $2', [
        c.extension,
        c.name,
        slot.toISOString(),
      ]);
      if (skipped.length)
        this.d.log.info('cron: slots missed while no instance ran were skipped', {
          extension: c.extension,
          cron: c.name,
          skipped: skipped.length,
        });
      return slot.getTime();
    });
    this.last.set(key, taken);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    await this.busy;
  }
}
