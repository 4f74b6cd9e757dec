/**
 * `ctx.jobs`, `ctx.cron` and `ctx.on`: an extension's durable jobs, schedules and hooks
 * (docs/extensions.md, "Jobs", "Cron", "Hooks"), on the jobs service (src/modules/jobs/service.ts).
 */
import type { CronOptions, CronRun, EnqueueOptions, HookOptions, JobsService } from '../modules/jobs/service';
import type { Job, JobOptions } from '../modules/jobs/runner';
import {
  PLATFORM_EVENTS,
  ROW_ACTIONS,
  type PlatformEvent,
  type PlatformEventType,
  type RowAction,
  type RowEvent,
} from '../modules/jobs/hooks';

export interface ExtensionJobs {
  /**
   * Declare a job: `handler(job)` gets `job.id`, `job.payload`, `job.attempt` (from 1) and
   * `job.signal` (aborted at `timeoutMs` and on shutdown). A throw is retried after the
   * backoff; after `attempts` the job is dead, with every attempt's error kept.
   */
  define<P = unknown>(name: string, handler: (job: Job<P>) => unknown, opts?: JobOptions): void;
  /**
   * Queue a job of a defined name; resolves to its id. With `tx` (from `ctx.db.transaction`)
   * it exists only if that transaction commits; an `idempotencyKey` used before (for this
   * name) returns the first job's id and queues nothing.
   */
  enqueue(name: string, payload?: unknown, opts?: EnqueueOptions): Promise<string>;
}

/** `ctx.on`: a table's changes, or a platform event. */
export interface ExtensionOn {
  <R = Record<string, unknown>>(
    table: string,
    actions: RowAction[],
    handler: (event: RowEvent<R>) => unknown,
    opts?: HookOptions,
  ): void;
  (event: PlatformEventType, handler: (event: PlatformEvent) => unknown, opts?: HookOptions): void;
}

export type ExtensionCron = (
  name: string,
  expression: string,
  handler: (run: CronRun) => unknown,
  opts?: CronOptions,
) => void;

const TABLE = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;

export function extensionJobs(
  jobs: JobsService,
  extension: string,
  dataSchema: string,
): { jobs: ExtensionJobs; cron: ExtensionCron; on: ExtensionOn } {
  const on: ExtensionOn = (first: string, second: unknown, third?: unknown, fourth?: unknown): void => {
    if (typeof second === 'function') {
      const type = first as PlatformEventType;
      if (!PLATFORM_EVENTS.includes(type))
        throw new Error(
          `on('${first}'): a platform event is one of ${PLATFORM_EVENTS.join(', ')}; a table's hook is on(table, actions, handler)`,
        );
      const opts = (third ?? {}) as HookOptions;
      const name = opts.name ?? type;
      jobs.on(
        extension,
        { name, source: `event:${type}`, event: type, handler: second as (e: RowEvent | PlatformEvent) => unknown },
        opts,
      );
      return;
    }
    if (!TABLE.test(first)) throw new Error(`on('${first}'): a table name is a plain identifier of the data schema`);
    const actions = second as RowAction[];
    if (!Array.isArray(actions) || !actions.length || actions.some((a) => !ROW_ACTIONS.includes(a)))
      throw new Error(`on('${first}'): actions are a non-empty list of ${ROW_ACTIONS.join(', ')}`);
    if (typeof third !== 'function') throw new Error(`on('${first}'): the handler must be a function`);
    const opts = (fourth ?? {}) as HookOptions;
    const name = opts.name ?? `${first}-${[...new Set(actions)].sort().join('-')}`;
    jobs.on(
      extension,
      {
        name,
        source: `table:${dataSchema}.${first}`,
        table: { schema: dataSchema, name: first, actions: [...new Set(actions)] },
        handler: third as (e: RowEvent | PlatformEvent) => unknown,
      },
      opts,
    );
  };
  return {
    jobs: {
      define: (name, handler, opts) => jobs.define(extension, name, handler, opts),
      enqueue: (name, payload, opts) => jobs.enqueue(extension, name, payload ?? null, opts),
    },
    cron: (name, expression, handler, opts) => jobs.cron(extension, name, expression, handler, opts),
    on,
  };
}
