/**
 * Hooks (docs/extensions.md, "Hooks"): an extension's handler for the changes of a table or
 * for platform events, fed from the realtime outbox (src/db/migrations/110_realtime.sql), where
 * a trigger records each change in the writing transaction and its id is stamped at commit,
 * in commit order. Platform events are outbox messages on `$platform:<type>` (180_jobs_cron_hooks.sql).
 *
 * Each hook has a checkpoint row (the last event id it handled) and one instance delivering it
 * at a time under a lease, so delivery keeps commit order. Events after the checkpoint are read
 * in id order and handed over one by one; the checkpoint moves after each page (and before a
 * lease could pass), so an instance killed mid-page has the rest delivered again by whoever
 * takes the lease: at least once. An event whose handler keeps failing is retried with
 * backoff and then parked as a dead job (kind `hook`, retried from the panel) and the hook goes on.
 */
import type { Db, Queryable } from '../../db/engine';
import { DatabaseUnavailableError, quoteIdent } from '../../db/engine';
import type { Settings } from '../../config/settings';
import type { Logger } from '../../log';
import { HOOK_SOURCE_MATCH, REALTIME_CHANNEL, enabledTables, outboxHead } from '../realtime/outbox';
import { backoffDelay } from './runner';

export type RowAction = 'insert' | 'update' | 'delete';
export const ROW_ACTIONS: RowAction[] = ['insert', 'update', 'delete'];
export const PLATFORM_EVENTS = [
  'auth.user_created',
  'auth.user_verified',
  'auth.user_deleted',
  'auth.signed_in',
  'mail.delivered',
  'mail.failed',
] as const;
export type PlatformEventType = (typeof PLATFORM_EVENTS)[number];

/** A row change as a hook receives it. */
export interface RowEvent<R = Record<string, unknown>> {
  /** Position in commit order, increasing across the platform (a numeric string past 2^53). */
  id: number | string;
  table: string;
  action: RowAction;
  /** The row as committed; for a delete, the row before. */
  row: R;
  /** The row before an update. */
  old?: R;
}

/** A platform event as a hook receives it. */
export interface PlatformEvent {
  id: number | string;
  type: PlatformEventType;
  user?: { id: string; email: string };
  job_id?: string;
  to?: string[];
}

export interface HookDef {
  extension: string;
  name: string;
  /** `table:<schema>.<table>` or `event:<type>`. */
  source: string;
  table?: { schema: string; name: string; actions: RowAction[] };
  event?: PlatformEventType;
  handler(event: RowEvent | PlatformEvent): Promise<unknown> | unknown;
  attempts: number;
  backoffMs: number;
}

const PAGE = 200;
const POLL_MS = 1000;
/** How often a hook that could not start is tried again. */
const START_RETRY_MS = 5000;

interface OutboxRow {
  id: string;
  rel_name: string | null;
  action: RowAction | null;
  new_row: Record<string, unknown> | null;
  old_row: Record<string, unknown> | null;
  channel: string | null;
  payload: Record<string, unknown> | null;
}

const eventId = (id: string): number | string => (Number.isSafeInteger(Number(id)) ? Number(id) : id);

/** The event a hook's handler receives for one outbox row. */
export function eventOf(r: OutboxRow): RowEvent | PlatformEvent {
  if (r.channel) {
    const data = (r.payload ?? {}) as Omit<PlatformEvent, 'id' | 'type'>;
    return { ...data, id: eventId(r.id), type: r.channel.slice('$platform:'.length) as PlatformEventType };
  }
  const ev: RowEvent = { id: eventId(r.id), table: r.rel_name!, action: r.action!, row: (r.new_row ?? r.old_row)! };
  if (r.action === 'update' && r.old_row) ev.old = r.old_row;
  return ev;
}

async function eventsAfter(q: Queryable, h: HookDef, after: string, limit = PAGE): Promise<OutboxRow[]> {
  // Sorted by the column, o.id: a bare `ORDER BY id` names the text output column below, and
  // text order ('1000' < '300') made a page skip events and the checkpoint pass them.
  const cols = 'o.id::text AS id, o.rel_name, o.action, o.new_row, o.old_row, o.channel, o.payload';
  if (h.table) {
    const { rows } = await q.query<OutboxRow>(
      `SELECT ${cols} FROM basalt.realtime_outbox o
        WHERE o.id > $1::bigint AND o.rel_schema = $2 AND o.rel_name = $3 AND o.action = ANY($4::text[])
        ORDER BY o.id LIMIT $5`,
      [after, h.table.schema, h.table.name, h.table.actions, limit],
    );
    return rows;
  }
  const { rows } = await q.query<OutboxRow>(
    `SELECT ${cols} FROM basalt.realtime_outbox o WHERE o.id > $1::bigint AND o.channel = $2 ORDER BY o.id LIMIT $3`,
    [after, `$platform:${h.event}`, limit],
  );
  return rows;
}

/** Each hook's checkpoint and lag, for the admin API and /metrics. */
export interface HookStatus {
  extension: string;
  name: string;
  source: string;
  position: string;
  /** Events of its source after the checkpoint (at most 10,000 counted). */
  lag_events: number;
  /** Age of the oldest event not yet handled, in seconds (0 when none). */
  lag_seconds: number;
  claimed_by: string | null;
  updated_at: Date;
}

export async function hookStatuses(q: Queryable): Promise<HookStatus[]> {
  const { rows } = await q.query<
    Omit<HookStatus, 'lag_events' | 'lag_seconds'> & { lag_events: string; lag_seconds: number | string }
  >(
    `SELECT h.extension, h.name, h.source, h.position::text AS position, h.claimed_by, h.updated_at,
            coalesce(l.n, 0) AS lag_events, coalesce(extract(epoch FROM now() - l.oldest), 0)::float8 AS lag_seconds
       FROM basalt.hook_checkpoints h
       LEFT JOIN LATERAL (
         SELECT count(*) AS n, min(o.created_at) AS oldest FROM (
           SELECT created_at FROM basalt.realtime_outbox o
            WHERE o.id > h.position AND ${HOOK_SOURCE_MATCH}
            ORDER BY o.id LIMIT 10000) o) l ON true
      ORDER BY h.extension, h.name`,
  );
  return rows.map((r) => ({ ...r, lag_events: Number(r.lag_events), lag_seconds: Number(r.lag_seconds) }));
}

/** Delivers every hook this process knows, one loop per hook. */
export class HookDelivery {
  private stopping = false;
  private readonly loops = new Map<string, { busy: boolean; again: boolean }>();
  /** Hooks being prepared, and when each last tried (`startOne`). */
  private readonly preparing = new Set<string>();
  private readonly lastStartTry = new Map<string, number>();
  private poll?: Timer;
  private unlisten?: () => Promise<void>;
  private readonly rounds = new Set<Promise<void>>();

  constructor(
    private readonly d: {
      db: Db;
      settings: Settings;
      log: Logger;
      worker: string;
      hooks: () => HookDef[];
      /** Park an event whose attempts are used up: a dead job of kind `hook`, in `tx`. */
      park(tx: Queryable, h: HookDef, event: RowEvent | PlatformEvent, errors: string[]): Promise<void>;
    },
  ) {}

  async start(): Promise<void> {
    const { db, log } = this.d;
    const hooks = this.d.hooks();
    if (!hooks.length) return;
    for (const h of hooks) await this.startOne(h);
    try {
      this.unlisten = await db.listen(REALTIME_CHANNEL, () => this.wake());
    } catch (e) {
      log.warn('hooks: LISTEN failed; polling only', { cause: e });
    }
    if (this.stopping) return void (await this.unlisten?.().catch(() => {}));
    this.poll = setInterval(() => this.wake(), POLL_MS);
    this.wake();
  }

  /**
   * Prepare `h`; its deliveries begin once that is done. A hook that could not (the database
   * failed at start) is tried again from `wake`, at most every START_RETRY_MS.
   */
  private async startOne(h: HookDef): Promise<void> {
    const id = `${h.extension}/${h.name}`;
    if (this.preparing.has(id) || this.loops.has(id)) return;
    this.preparing.add(id);
    this.lastStartTry.set(id, Date.now());
    try {
      await this.prepare(h);
      this.loops.set(id, { busy: false, again: false });
    } catch (e) {
      this.d.log.error('hooks: a hook could not start; tried again', {
        extension: h.extension,
        hook: h.name,
        cause: e,
      });
    } finally {
      this.preparing.delete(id);
    }
  }

  /** Capture on for the hook's table; its checkpoint at the outbox's head on its first start. */
  private async prepare(h: HookDef): Promise<void> {
    const { db } = this.d;
    if (h.table) {
      const enabled = await enabledTables(db, h.table.schema);
      if (!enabled.has(h.table.name))
        await db.query('SELECT basalt.realtime_enable($1::text)', [
          `${quoteIdent(h.table.schema)}.${quoteIdent(h.table.name)}`,
        ]);
    }
    const { head } = await outboxHead(db);
    await db.query(
      `INSERT INTO basalt.hook_checkpoints (extension, name, source, position) VALUES ($1, $2, $3, $4)
       ON CONFLICT (extension, name) DO UPDATE SET source = EXCLUDED.source, seen_at = now()`,
      [h.extension, h.name, h.source, head],
    );
    if (db.kind === 'embedded')
      await db.query(
        'UPDATE basalt.hook_checkpoints SET claimed_by = NULL, lease_until = NULL WHERE extension = $1 AND name = $2',
        [h.extension, h.name],
      );
  }

  /** Deliver every hook now (each once more after a round under way). */
  wake(): void {
    if (this.stopping) return;
    for (const h of this.d.hooks()) {
      const id = `${h.extension}/${h.name}`;
      if (this.loops.has(id)) this.wakeOne(h);
      else if (Date.now() - (this.lastStartTry.get(id) ?? 0) >= START_RETRY_MS)
        void this.startOne(h).then(() => this.wakeOne(h));
    }
  }

  /**
   * One hook's round, or once more after the one under way. Only this hook's own round runs
   * it again: waking the others from here would have two busy hooks wake each other forever.
   */
  private wakeOne(h: HookDef): void {
    const loop = this.loops.get(`${h.extension}/${h.name}`);
    if (!loop || this.stopping) return;
    if (loop.busy) {
      loop.again = true;
      return;
    }
    loop.busy = true;
    const round = this.round(h)
      .catch((e) =>
        this.d.log.warn('hooks: delivery failed; retried', { extension: h.extension, hook: h.name, cause: e }),
      )
      .finally(() => {
        loop.busy = false;
        this.rounds.delete(round);
        if (loop.again) {
          loop.again = false;
          // A macrotask away: on the embedded engine statements resolve as microtasks, so a
          // hook kept busy must still let the event loop serve requests between rounds.
          setImmediate(() => this.wakeOne(h));
        }
      });
    this.rounds.add(round);
  }

  /** Take the hook's lease (or keep it) and deliver what is after its checkpoint. */
  private async round(h: HookDef): Promise<void> {
    const { db, settings, worker } = this.d;
    const leaseMs = () => settings.get('jobs.lease_ms');
    // Nothing after the checkpoint: nothing to take a lease for (reads only, every poll).
    const at = await db.query<{ position: string }>(
      'SELECT position::text AS position FROM basalt.hook_checkpoints WHERE extension = $1 AND name = $2',
      [h.extension, h.name],
    );
    if (!at.rows[0] || !(await eventsAfter(db, h, at.rows[0].position, 1)).length) return;
    const { rows } = await db.query<{ position: string }>(
      `UPDATE basalt.hook_checkpoints
          SET claimed_by = $3, lease_until = now() + ($4::int * interval '1 millisecond'), seen_at = now()
        WHERE extension = $1 AND name = $2 AND (claimed_by IS NULL OR claimed_by = $3 OR lease_until < now())
        RETURNING position::text AS position`,
      [h.extension, h.name, worker, leaseMs()],
    );
    if (!rows[0]) return;
    let position = rows[0].position;
    let renewedAt = Date.now();
    /**
     * Move the checkpoint forward (and the lease); false when the lease went to another instance.
     * Never back: a lease renewal still in flight from the handler before must not undo a later save.
     */
    const save = async (q: Queryable, to: string) => {
      const r = await q.query(
        `UPDATE basalt.hook_checkpoints
            SET position = greatest(position, $4::bigint), lease_until = now() + ($5::int * interval '1 millisecond'), updated_at = now()
          WHERE extension = $1 AND name = $2 AND claimed_by = $3`,
        [h.extension, h.name, worker, to, leaseMs()],
      );
      renewedAt = Date.now();
      return r.rowCount === 1;
    };
    while (!this.stopping) {
      const page = await eventsAfter(db, h, position);
      if (!page.length) return;
      let handled = position;
      for (const r of page) {
        if (this.stopping) break;
        // Keep the lease well before it could pass: save what is handled so far.
        if (Date.now() - renewedAt > leaseMs() / 3) {
          if (!(await save(db, handled))) return;
          position = handled;
        }
        const event = eventOf(r);
        const errors = await this.deliver(
          h,
          event,
          () => renewedAt,
          async () => {
            if (!(await save(db, handled))) throw new LeaseLost();
            position = handled;
          },
        );
        if (errors === 'stopped') break;
        if (errors.length) {
          const parked = await db.transaction(async (tx) => {
            await this.d.park(tx, h, event, errors);
            if (!(await save(tx, r.id))) throw new LeaseLost();
            return true;
          });
          if (parked) position = r.id;
        }
        handled = r.id;
      }
      if (handled !== position) {
        if (!(await save(db, handled))) return;
        position = handled;
      }
      if (page.length < PAGE) return;
      // Let the event loop serve requests between pages (embedded statements resolve as microtasks).
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Hand one event to the handler: up to `attempts` tries with backoff. Returns the errors
   * ([] when it was handled), or 'stopped' when shutdown came between tries. A try that failed
   * because the platform's database was busy or out of reach (DatabaseUnavailableError, e.g. no
   * connection within database.busy_timeout_ms) says nothing of the event: it is not counted,
   * and the event is tried again after the backoff for as long as that lasts, never parked.
   */
  private async deliver(
    h: HookDef,
    event: RowEvent | PlatformEvent,
    renewedAt: () => number,
    renew: () => Promise<void>,
  ): Promise<string[] | 'stopped'> {
    const errors: string[] = [];
    const leaseMs = this.d.settings.get('jobs.lease_ms');
    // Tries the database was unavailable for: logged at the first and every 60th (an outage is long).
    for (let attempt = 1, unavailable = 0; ; ) {
      const beat = setInterval(() => void renew().catch(() => {}), Math.max(Math.floor(leaseMs / 3), 100));
      let counted = true;
      try {
        await h.handler(event);
        return [];
      } catch (e) {
        if (e instanceof LeaseLost) throw e;
        counted = !databaseUnavailable(e);
        if (counted) errors.push(e instanceof Error ? e.message : String(e));
        if (counted || unavailable++ % 60 === 0)
          this.d.log.warn(
            counted ? 'hooks: a handler failed' : 'hooks: a handler found the database unavailable; tried again',
            {
              extension: h.extension,
              hook: h.name,
              event: event.id,
              attempt,
              error: e instanceof Error ? e.message : String(e),
            },
          );
      } finally {
        clearInterval(beat);
      }
      if (counted && attempt === h.attempts) return errors;
      const until =
        Date.now() +
        (counted
          ? backoffDelay({ backoff: 'exponential', backoffMs: h.backoffMs }, attempt++)
          : Math.max(100, Math.min(h.backoffMs, 1000)));
      while (Date.now() < until) {
        if (this.stopping) return 'stopped';
        if (Date.now() - renewedAt() > leaseMs / 3) await renew();
        await Bun.sleep(Math.min(100, until - Date.now()));
      }
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.poll);
    await this.unlisten?.().catch(() => {});
    await Promise.race([Promise.allSettled([...this.rounds]), Bun.sleep(3000)]);
    // Hand the hooks over at once rather than when the leases pass.
    if (this.loops.size)
      await this.d.db
        .query('UPDATE basalt.hook_checkpoints SET claimed_by = NULL, lease_until = NULL WHERE claimed_by = $1', [
          this.d.worker,
        ])
        .catch(() => {});
  }
}

/** The platform's database was busy or out of reach somewhere in `e` (its causes included). */
function databaseUnavailable(e: unknown): boolean {
  let c: unknown = e;
  for (let depth = 0; depth < 5 && c instanceof Error; depth++) {
    if (c instanceof DatabaseUnavailableError) return true;
    c = c.cause;
  }
  return false;
}

class LeaseLost extends Error {
  constructor() {
    super('the hook was taken over by another instance');
  }
}
