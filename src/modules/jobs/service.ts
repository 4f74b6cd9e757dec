/**
 * Jobs, cron and hooks of extensions (docs/extensions.md): the definitions extensions
 * register in setup, the runner, the cron scheduler and the hook delivery of this instance
 * (started by the `jobs, cron and hooks` worker, src/workers.ts), and what the admin API and
 * `basalt jobs` do with jobs. One mechanism under all three: the job table (store.ts).
 */
import type { Platform } from '../../platform';
import type { Queryable } from '../../db/engine';
import { JobErrors } from './errors';
import { isUuid } from '../../util/uuid';
import { parseSchedule, CronScheduler, cronStatuses, type CronDef, type CronStatus } from './cron';
import { HookDelivery, hookStatuses, type HookDef, type HookStatus, type PlatformEvent, type RowEvent } from './hooks';
import { JobRunner, type Definition, type Job, type JobOptions } from './runner';
import {
  cancelJob,
  countByState,
  getJob,
  insertJob,
  listJobs,
  retryJob,
  type JobFilter,
  type JobKind,
  type JobRow,
} from './store';

/** How soon a part (runner, cron, hooks) that could not start is started again. */
const START_RETRY_MS = 5000;

/** Job, cron and hook names: what an operator filters by. */
export const JOB_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;

export interface EnqueueOptions {
  /** The same key (per extension and job name) returns the first job's id and enqueues nothing. */
  idempotencyKey?: string;
  /** Not before this time. */
  runAt?: Date | string | number;
  /** Not before this many milliseconds from now. */
  delayMs?: number;
  /** A transaction of `ctx.db.transaction`: the job exists only if it commits. */
  tx?: Queryable;
}

/** A cron run as its handler receives it. */
export interface CronRun {
  id: string;
  /** The scheduled time of this run (ISO 8601, UTC), the same on every instance. */
  slot: string;
  attempt: number;
  signal: AbortSignal;
}

export interface CronOptions extends JobOptions {
  /** IANA time zone the expression is read in (default UTC). */
  timezone?: string;
}

export interface HookOptions {
  /** The hook's name: its checkpoint is kept under it (rename it and it starts afresh). */
  name?: string;
  /** Tries of one event before it is parked as a dead job (default 3). */
  attempts?: number;
  /** Base delay between tries (default 1000 ms, doubled each time). */
  backoffMs?: number;
}

export interface JobsStatus {
  cron: (CronStatus & { next_slot: string | null })[];
  hooks: HookStatus[];
}

export class JobsService {
  private readonly defs = new Map<string, Definition>();
  private readonly crons = new Map<string, CronDef>();
  private readonly hooks = new Map<string, HookDef>();
  readonly runner: JobRunner;
  private readonly scheduler: CronScheduler;
  private readonly delivery: HookDelivery;
  private started = false;
  private stopped = false;

  constructor(private readonly p: Platform) {
    this.runner = new JobRunner({
      db: p.db,
      settings: p.settings,
      log: p.log,
      definitions: () => [...this.defs.values()],
    });
    this.scheduler = new CronScheduler({
      db: p.db,
      log: p.log,
      entries: () => [...this.crons.values()],
      enqueue: (tx, c, slot) => {
        const def = this.defs.get(`${c.extension}/${c.name}`)!;
        return insertJob(tx, {
          extension: c.extension,
          name: c.name,
          kind: 'cron',
          payload: { slot: slot.toISOString() },
          maxAttempts: def.attempts,
          idempotencyKey: slot.toISOString(),
        });
      },
    });
    this.delivery = new HookDelivery({
      db: p.db,
      settings: p.settings,
      log: p.log,
      worker: this.runner.worker,
      hooks: () => [...this.hooks.values()],
      park: async (tx, h, event, errors) => {
        await tx.query(
          `INSERT INTO basalt.jobs (extension, name, kind, state, payload, attempts, max_attempts, errors, finished_at)
           VALUES ($1, $2, 'hook', 'dead', $3::jsonb, $4, $4, $5::jsonb, now())`,
          [
            h.extension,
            h.name,
            JSON.stringify(event),
            errors.length,
            JSON.stringify(errors.map((error, i) => ({ attempt: i + 1, at: new Date().toISOString(), error }))),
          ],
        );
        this.p.log.error('hooks: an event was parked as a dead job after its attempts', {
          extension: h.extension,
          hook: h.name,
          event: event.id,
        });
      },
    });
  }

  private claimName(extension: string, name: string, what: string): string {
    if (!JOB_NAME.test(name))
      throw new Error(`${what}('${name}'): a name is 1-100 of A-Z a-z 0-9 _ . : - starting with a letter or digit`);
    const key = `${extension}/${name}`;
    if (this.defs.has(key))
      throw new Error(`${what}('${name}'): this extension already has a job, cron entry or hook named so`);
    return key;
  }

  private register(
    extension: string,
    name: string,
    kind: JobKind,
    run: Definition['run'],
    o: JobOptions,
    what: string,
  ): void {
    const key = this.claimName(extension, name, what);
    const int = (v: number | undefined, d: number, min: number, field: string) => {
      if (v === undefined) return d;
      if (!Number.isInteger(v) || v < min)
        throw new Error(`${what}('${name}'): ${field} must be an integer of at least ${min}`);
      return v;
    };
    if (o.backoff !== undefined && o.backoff !== 'exponential' && o.backoff !== 'fixed')
      throw new Error(`${what}('${name}'): backoff is 'exponential' or 'fixed'`);
    this.defs.set(key, {
      extension,
      name,
      kind,
      run,
      attempts: int(o.attempts, 3, 1, 'attempts'),
      backoff: o.backoff ?? 'exponential',
      backoffMs: int(o.backoffMs, 1000, 0, 'backoffMs'),
      timeoutMs: o.timeoutMs === undefined ? undefined : int(o.timeoutMs, 0, 1, 'timeoutMs'),
      concurrency: int(o.concurrency, 1, 1, 'concurrency'),
    });
    if (this.started) this.runner.wake();
  }

  /** `ctx.jobs.define`. */
  define<P>(extension: string, name: string, handler: (job: Job<P>) => unknown, o: JobOptions = {}): void {
    if (typeof handler !== 'function') throw new Error(`jobs.define('${name}'): the handler must be a function`);
    this.register(extension, name, 'job', async (job) => handler(job as Job<P>), o, 'jobs.define');
  }

  /** `ctx.jobs.enqueue`: the job's id (the first job's, for an idempotency key already used). */
  async enqueue(extension: string, name: string, payload: unknown, o: EnqueueOptions = {}): Promise<string> {
    const def = this.defs.get(`${extension}/${name}`);
    if (def?.kind !== 'job')
      throw new Error(`jobs.enqueue('${name}'): no job of that name; define it first with ctx.jobs.define`);
    if (
      o.idempotencyKey !== undefined &&
      (typeof o.idempotencyKey !== 'string' || !o.idempotencyKey || o.idempotencyKey.length > 200)
    )
      throw new Error(`jobs.enqueue('${name}'): idempotencyKey is a string of 1-200 characters`);
    let runAt: number | undefined;
    if (o.runAt !== undefined) {
      runAt = new Date(o.runAt).getTime();
      if (Number.isNaN(runAt)) throw new Error(`jobs.enqueue('${name}'): runAt is not a date`);
    }
    if (o.delayMs !== undefined) {
      if (!Number.isFinite(o.delayMs) || o.delayMs < 0)
        throw new Error(`jobs.enqueue('${name}'): delayMs must be 0 or more`);
      runAt = Math.max(runAt ?? 0, Date.now() + o.delayMs);
    }
    const id = await insertJob(o.tx ?? this.p.db, {
      extension,
      name,
      kind: 'job',
      payload,
      maxAttempts: def.attempts,
      idempotencyKey: o.idempotencyKey,
      runAt,
    });
    if (!o.tx && this.started) this.runner.wake();
    return id;
  }

  /** `ctx.cron`: a schedule whose runs are jobs. */
  cron(
    extension: string,
    name: string,
    expression: string,
    handler: (run: CronRun) => unknown,
    o: CronOptions = {},
  ): void {
    if (typeof handler !== 'function') throw new Error(`cron('${name}'): the handler must be a function`);
    const timezone = o.timezone ?? 'UTC';
    let schedule: CronDef['schedule'];
    try {
      schedule = parseSchedule(expression, timezone);
    } catch (e) {
      throw new Error(`cron('${name}', '${expression}'): ${e instanceof Error ? e.message : String(e)}`);
    }
    this.register(
      extension,
      name,
      'cron',
      async (job) =>
        handler({ id: job.id, slot: (job.payload as { slot: string }).slot, attempt: job.attempt, signal: job.signal }),
      o,
      'cron',
    );
    this.crons.set(`${extension}/${name}`, { extension, name, expression, timezone, schedule });
  }

  /** `ctx.on`: a hook on a table's changes or on a platform event. A parked event retried runs the same handler as a job. */
  on(extension: string, hook: Omit<HookDef, 'extension' | 'attempts' | 'backoffMs'>, o: HookOptions): void {
    const attempts = o.attempts ?? 3;
    const backoffMs = o.backoffMs ?? 1000;
    if (!Number.isInteger(attempts) || attempts < 1)
      throw new Error(`on('${hook.name}'): attempts must be an integer of at least 1`);
    this.register(
      extension,
      hook.name,
      'hook',
      async (job) => hook.handler(job.payload as RowEvent | PlatformEvent),
      { attempts: 1, backoffMs },
      'on',
    );
    this.hooks.set(`${extension}/${hook.name}`, { ...hook, extension, attempts, backoffMs });
  }

  /** Drop an extension's definitions (it was refused after its setup ran): none of its work runs here. */
  forget(extension: string): void {
    for (const m of [this.defs, this.crons, this.hooks])
      for (const k of [...m.keys()]) if (k.startsWith(`${extension}/`)) m.delete(k);
  }

  /** Start the runner, cron and hooks of this instance (the worker does, after extensions' setup). */
  async start(): Promise<void> {
    this.started = true;
    for (const [what, part] of [
      ['jobs', this.runner],
      ['cron', this.scheduler],
      ['hooks', this.delivery],
    ] as const) {
      // A database failing at start must not leave jobs, cron or hooks off until a restart.
      for (;;) {
        if (this.stopped) return;
        try {
          await part.start();
          break;
        } catch (e) {
          this.p.log.error(`${what}: could not start; tried again in ${START_RETRY_MS / 1000} s`, { cause: e });
          await Bun.sleep(START_RETRY_MS);
        }
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.scheduler.stop();
    await this.delivery.stop();
    await this.runner.stop();
  }

  list(f: JobFilter): Promise<JobRow[]> {
    return listJobs(this.p.db, f);
  }

  /** A job by id, or 404 job_not_found. */
  async get(id: string): Promise<JobRow> {
    const job = isUuid(id) ? await getJob(this.p.db, id) : undefined;
    if (!job) throw JobErrors.notFound(id);
    return job;
  }

  /** Queue a dead or cancelled job again with fresh attempts (on `q`, an audited transaction), or 404 / 409 naming its state. */
  async retry(id: string, q: Queryable = this.p.db): Promise<JobRow> {
    const job = isUuid(id) ? await retryJob(q, id) : undefined;
    if (job) {
      if (this.started) this.runner.wake();
      return job;
    }
    const now = isUuid(id) ? await getJob(q, id) : undefined;
    if (!now) throw JobErrors.notFound(id);
    throw JobErrors.notRetryable(id, now.state);
  }

  /** Cancel a queued job (on `q`), or 404 / 409 naming its state. */
  async cancel(id: string, q: Queryable = this.p.db): Promise<JobRow> {
    const job = isUuid(id) ? await cancelJob(q, id) : undefined;
    if (job) return job;
    const now = isUuid(id) ? await getJob(q, id) : undefined;
    if (!now) throw JobErrors.notFound(id);
    throw JobErrors.notCancellable(id, now.state);
  }

  /** Each cron entry (last slot and result, next slot) and each hook (checkpoint, lag). */
  async status(): Promise<JobsStatus> {
    const [cron, hooks] = await Promise.all([cronStatuses(this.p.db), hookStatuses(this.p.db)]);
    const now = new Date();
    return {
      cron: cron.map((c) => {
        const known = this.crons.get(`${c.extension}/${c.name}`)?.schedule;
        let next: Date | null = null;
        try {
          next = (known ?? parseSchedule(c.expression, c.timezone)).nextRun(now);
        } catch {}
        return { ...c, next_slot: next?.toISOString() ?? null };
      }),
      hooks,
    };
  }

  /**
   * The /metrics lines: jobs by state, and each hook's lag in events and seconds. Empty when
   * the database does not answer (the rest of /metrics still does).
   */
  async metrics(): Promise<string> {
    try {
      const [counts, hooks] = await Promise.all([countByState(this.p.db), hookStatuses(this.p.db)]);
      const label = (v: string) => v.replace(/["\\\n]/g, '_');
      const out = ['# HELP basalt_jobs Jobs of extensions by state.', '# TYPE basalt_jobs gauge'];
      for (const [state, n] of Object.entries(counts)) out.push(`basalt_jobs{state="${state}"} ${n}`);
      out.push(
        "# HELP basalt_hook_lag_events Events after a hook's checkpoint (counted up to 10000).",
        '# TYPE basalt_hook_lag_events gauge',
      );
      for (const h of hooks)
        out.push(`basalt_hook_lag_events{extension="${label(h.extension)}",hook="${label(h.name)}"} ${h.lag_events}`);
      out.push(
        '# HELP basalt_hook_lag_seconds Age of the oldest event a hook has not handled.',
        '# TYPE basalt_hook_lag_seconds gauge',
      );
      for (const h of hooks)
        out.push(`basalt_hook_lag_seconds{extension="${label(h.extension)}",hook="${label(h.name)}"} ${h.lag_seconds}`);
      return out.join('\n') + '\n';
    } catch (e) {
      this.p.log.warn('jobs: metrics could not be read', { cause: e });
      return '';
    }
  }
}

export function createJobsService(p: Platform): JobsService {
  return new JobsService(p);
}
