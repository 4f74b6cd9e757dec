/**
 * The instance's realtime hub (docs/realtime.md, "Delivery"): the streams it serves, one
 * reader of the outbox that feeds them all, and the replay of a resuming stream.
 *
 * The reader wakes on the stamp trigger's NOTIFY (delivered by the embedded engine to its
 * own process too, and by external PostgreSQL to every instance), and every
 * `POLL_MS` as a backstop for a lost notification (EMBEDDED_POLL_MS on the embedded engine,
 * where the process is alone with its database and every NOTIFY is delivered in-process:
 * the backstop there only covers the unforeseen); it reads events after the last id it
 * delivered, in pages, and fans each page out (fanout.ts). A stream that resumes replays
 * from the outbox on its own until it reaches the reader's position between two pages,
 * then joins the live feed; ids at or below a stream's cursor are never sent twice.
 */
import type { Db, Queryable } from '../../db/engine';
import { eventsAfter, outboxHead, pruneOutbox } from './outbox';
import { fanout, type FanoutDeps } from './fanout';
import { frame, HEARTBEAT, type EndReason, type Stream } from './stream';

const PAGE = 500;
/** Seconds the dashboard's events-per-second figure is averaged over. */
const RATE_WINDOW = 10;
const POLL_MS = 2000;
const EMBEDDED_POLL_MS = 30_000;
const PRUNE_MS = 30_000;
const PRUNE_BATCH = 5000;

export interface HubCounters {
  connections: number;
  sent: number;
  droppedByRules: number;
  resumes: number;
  resets: number;
  slow: number;
}

export interface HubDeps extends Omit<FanoutDeps, 'counters' | 'onError'> {
  db: Queryable & Pick<Db, 'atOnce'>;
  listen: (onWake: () => void) => Promise<() => Promise<void>>;
  /** The process is alone with its database (the embedded engine): the backstop poll is EMBEDDED_POLL_MS. */
  alone?: boolean;
  retentionSeconds: () => number;
  /** Between two heartbeats (realtime.heartbeat_seconds). */
  heartbeatMs: () => number;
  onError: (msg: string, cause: unknown) => void;
}

export class Hub {
  readonly streams = new Set<Stream>();
  readonly counters: HubCounters = { connections: 0, sent: 0, droppedByRules: 0, resumes: 0, resets: 0, slow: 0 };
  /** The last event id the live feed has delivered. */
  position = 0;
  private running?: Promise<void>;
  private again = false;
  private timers: ReturnType<typeof setInterval>[] = [];
  /** Once a second: the events sent so far, for the rate. */
  private samples: { at: number; sent: number }[] = [];
  private unlisten?: () => Promise<void>;
  private stopped = false;
  private readonly fanoutDeps: FanoutDeps;

  constructor(private readonly deps: HubDeps) {
    this.fanoutDeps = {
      ...deps,
      counters: this.counters,
      onError: (cause) => deps.onError('realtime: rows could not be evaluated for one identity', cause),
    };
  }

  async start(): Promise<void> {
    // A start refused for a moment (the database busy while the instance comes up) is
    // retried: given up, the reader would never feed a stream of this instance.
    let head: number | undefined;
    for (;;) {
      try {
        head ??= (await outboxHead(this.deps.db)).head;
        this.position = head;
        this.unlisten = await this.deps.listen(() => this.wake());
        break;
      } catch (e) {
        if (this.stopped) return;
        this.deps.onError('realtime reader could not start; retrying', e);
        await Bun.sleep(POLL_MS);
        if (this.stopped) return;
      }
    }
    const every = (ms: number, fn: () => void) => {
      const t = setInterval(fn, ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.deps.alone ? EMBEDDED_POLL_MS : POLL_MS, () => this.wake());
    // The interval is a live setting: checked every second, so a change applies at once.
    let lastBeat = performance.now();
    every(1000, () => {
      this.samples.push({ at: performance.now(), sent: this.counters.sent });
      if (this.samples.length > RATE_WINDOW + 1) this.samples.shift();
      if (performance.now() - lastBeat < this.deps.heartbeatMs() - 50) return;
      lastBeat = performance.now();
      for (const s of [...this.streams]) if (!s.cutIfBehind()) s.write(HEARTBEAT);
    });
    every(PRUNE_MS, () => void this.prune().catch((e) => this.deps.onError('realtime prune failed', e)));
  }

  /** Events sent per second over the last RATE_WINDOW seconds (the dashboard's figure). */
  eventsPerSecond(): number {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (!first || !last || last.at - first.at < 500) return 0;
    return Math.round(((last.sent - first.sent) * 10_000) / (last.at - first.at)) / 10;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await this.unlisten?.().catch(() => {}); // stopping: the connection that listened is closing anyway
    for (const s of [...this.streams]) s.end('shutdown');
    await this.running?.catch(() => {}); // the page's own failure was logged where it ran
  }

  /** Delete events past retention, in batches (every instance may; the deletes do not collide). */
  async prune(): Promise<void> {
    const keep = this.deps.retentionSeconds();
    while ((await pruneOutbox(this.deps.db, keep, PRUNE_BATCH)) === PRUNE_BATCH && !this.stopped) {}
  }

  /** Run the reader now (or once more after the run in progress). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.read()
      .catch((e) => this.deps.onError('realtime reader failed', e))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Wait for the reader to be idle (tests, replays joining the live feed). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async read(): Promise<void> {
    for (;;) {
      if (!this.streams.size) {
        // Nobody listens: skip ahead without reading rows.
        this.position = Math.max(this.position, (await outboxHead(this.deps.db)).head);
        return;
      }
      const { events, more } = await eventsAfter(this.deps.db, this.position, PAGE);
      if (!events.length) return;
      const live = [...this.streams].filter((s) => s.live);
      await fanout(this.fanoutDeps, events, live);
      this.position = events[events.length - 1]!.id;
      if (!more) return;
      // Let the listener write to the sockets before the next page (the embedded engine
      // holds the thread while it runs a statement).
      await Bun.sleep(0);
    }
  }

  add(s: Stream): void {
    this.streams.add(s);
    this.counters.connections++;
  }

  /** A stream ended, whatever the reason. */
  removed(s: Stream, why: EndReason): void {
    this.streams.delete(s);
    if (why === 'slow') this.counters.slow++;
  }

  /**
   * Start feeding a new stream. Without `lastEventId` it joins live at the reader's
   * position. With one inside retention it replays what it missed, then joins; otherwise
   * (pruned since, or not an id of this database) it gets `event: reset` with the
   * current position as its id and joins live.
   */
  async attach(s: Stream, lastEventId: number | undefined): Promise<void> {
    if (lastEventId === undefined) {
      s.cursor = this.position;
      s.live = true;
      return;
    }
    const { head, prunedThrough } = await outboxHead(this.deps.db);
    if (lastEventId < prunedThrough || lastEventId > head) {
      this.counters.resets++;
      s.cursor = this.position;
      s.write(frame('reset', {}, this.position));
      s.live = true;
      return;
    }
    this.counters.resumes++;
    s.cursor = lastEventId;
    void this.replay(s).catch((e) => {
      this.deps.onError('realtime replay failed', e);
      s.end('error');
    });
  }

  private async replay(s: Stream): Promise<void> {
    while (!s.closed) {
      // Join between two pages of the reader: the next page it reads starts after `position`.
      if (s.cursor >= this.position && !this.running) {
        s.live = true;
        return;
      }
      // At the client's pace: a page of at most what the stream may hold, read once the last
      // one has been taken, so a long backlog is never queued at once (and cut as slow).
      await s.drained();
      if (s.closed) return;
      const { events } = await eventsAfter(this.deps.db, s.cursor, PAGE, s.limitBytes);
      if (events.length) await fanout(this.fanoutDeps, events, [s]);
      else if (this.running)
        await this.running.catch(() => {}); // only waited for; its failure was logged where it ran
      else if (s.cursor < this.position) s.cursor = this.position; // nothing stamped in between
    }
  }
}
