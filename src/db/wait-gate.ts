/**
 * Bounded, fair waiting for the database (docs/database.md, "Waiting for the database").
 *
 * A gate owns `slots` places: the embedded engine's one session, or the connections of an
 * external pool. Work takes a place before it touches the database and gives it back when
 * it ends; a transaction holds its place from BEGIN to COMMIT or ROLLBACK. Work that finds
 * no place queues, and:
 * - waits at most `busyTimeoutMs()`, then fails with DatabaseBusyError (→ 503
 *   `database_busy` with `Retry-After`), so nothing waits without bound;
 * - never runs once its signal has aborted (the client has gone). A statement's wait (`run`)
 *   reads the signal when its turn comes and at its deadline (then counted as abandoned, not
 *   refused); a long holder's wait (`acquire`: a transaction's begin, whose signal also says the
 *   key was revoked or the instance is stopping) listens to it and leaves the queue at once. An
 *   abort listener per waiting statement cost the service key's select on external PostgreSQL
 *   about 0.05 of its CPU ratio at 64 connections (docs/bench/2026-11-26-request-signal.md);
 * - is refused at once when its key is revoked (`cancel`).
 *
 * Order: the platform's own work (no key) first, in arrival order; then API keys in turn —
 * the key holding the fewest places first, ties to the key served longest ago — each key's
 * work in arrival order. One key never holds more than its share of the places
 * (`keyShare()`, a fraction; at least one place).
 *
 * A holder opened with `preempt` (a Database API transaction) can be asked to give its
 * place back: by interactive platform work (an HTTP request or a management command, never
 * a background timer) after a grace of PLATFORM_GRACE_MS (or a quarter of the busy timeout,
 * if less), and by another key's work after half the busy timeout when that key holds no
 * place or at least two fewer than the holder's key. Within the grace only a holder that
 * has already been idle that long is asked (so a transaction left idle yields at once, one
 * between quick statements keeps going); once the grace has passed, any idle one. The
 * holder decides: the Database API rolls back a transaction idle for at least the time
 * asked and keeps a busy one, which is asked again when it becomes idle (`Place.idle`).
 */
import {
  DatabaseBusyError,
  runTransaction,
  WaitAbandonedError,
  type Db,
  type Queryable,
  type Tx,
  type TxOptions,
  type WaitOptions,
  type WaitStats,
} from './engine';
import { isInteractive } from './interactive';

/** How long interactive platform work waits behind an idle API transaction before asking it to yield. */
export const PLATFORM_GRACE_MS = 250;

export interface GateOptions {
  slots: number;
  /** The longest wait; none when omitted (offline tools). */
  busyTimeoutMs?: () => number;
  /** The largest share of the places one API key may hold, 0 < share ≤ 1. Default 1. */
  keyShare?: () => number;
}

/** A place taken: give it back once, when the work ends. */
export interface Place {
  release(): void;
  /** The holder is between statements: work waiting for a place may now ask it to yield. */
  idle(): void;
}

/** Asked to yield: true when the holder, idle for at least `minIdleMs`, will end now. */
export type Preempt = (minIdleMs: number) => boolean;

interface Holder {
  key: string | undefined;
  preempt: Preempt | undefined;
  yielding: boolean;
  since: number;
}

interface Waiter {
  key: string | undefined;
  preempt: Preempt | undefined;
  interactive: boolean;
  /** How long a holder must have been idle for this waiter to ask it to yield; none: never asks. */
  minIdle?: number;
  victim?: Holder;
  signal?: AbortSignal;
  onAbort?: () => void;
  timers: ReturnType<typeof setTimeout>[];
  resolve: (p: Place) => void;
  reject: (e: unknown) => void;
}

interface Lane {
  waiters: Waiter[];
  held: number;
  /** When the key was last given a place (a sequence number): the oldest turn goes first. */
  turn: number;
}

const retryAfter = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

export class WaitGate {
  private used = 0;
  /** Holders that can be asked to yield (opened with `preempt`): without one, `contend` has nobody to ask. */
  private preemptible = 0;
  private turns = 0;
  private readonly platform: Waiter[] = [];
  private readonly lanes = new Map<string, Lane>();
  private readonly holders = new Set<Holder>();
  readonly stats: WaitStats = { waited: 0, refused: 0, abandoned: 0, preempted: 0 };

  constructor(private readonly o: GateOptions) {}

  /** Run `fn` holding a place; the place is given back when it settles. */
  run<T>(w: WaitOptions, fn: () => Promise<T>): Promise<T> {
    if (w.signal?.aborted) return Promise.reject(new WaitAbandonedError());
    const now = this.tryTake(w.key, undefined);
    if (now) return holding(now, fn);
    return this.wait(w, undefined, false).then((p) => holding(p, fn));
  }

  /** Take a place for a long holder (a transaction); `preempt` as in the file comment. */
  acquire(w: WaitOptions, preempt?: Preempt): Promise<Place> {
    if (w.signal?.aborted) return Promise.reject(new WaitAbandonedError());
    const now = this.tryTake(w.key, preempt);
    return now ? Promise.resolve(now) : this.wait(w, preempt, true);
  }

  /** Refuse every queued wait of `key` with `err` (its key was revoked). */
  cancel(key: string, err: unknown): void {
    const lane = this.lanes.get(key);
    if (!lane) return;
    for (const w of [...lane.waiters]) {
      this.drop(w);
      w.reject(err);
    }
  }

  private cap(): number {
    const share = this.o.keyShare?.() ?? 1;
    return Math.max(1, Math.floor(this.o.slots * share));
  }

  private lane(key: string): Lane {
    let l = this.lanes.get(key);
    if (!l) this.lanes.set(key, (l = { waiters: [], held: 0, turn: 0 }));
    return l;
  }

  /** A place now, if one is free and nobody queued goes first. */
  private tryTake(key: string | undefined, preempt: Preempt | undefined): Place | undefined {
    if (this.used >= this.o.slots || this.platform.length) return undefined;
    if (key !== undefined) {
      const l = this.lanes.get(key);
      if (l && (l.waiters.length || l.held >= this.cap())) return undefined;
    }
    return this.grant(key, preempt);
  }

  private grant(key: string | undefined, preempt: Preempt | undefined): Place {
    const h: Holder = { key, preempt, yielding: false, since: performance.now() };
    this.holders.add(h);
    this.used++;
    if (preempt) this.preemptible++;
    if (key !== undefined) {
      const l = this.lane(key);
      l.held++;
      l.turn = ++this.turns;
    }
    let done = false;
    return {
      release: () => {
        if (done) return;
        done = true;
        this.holders.delete(h);
        this.used--;
        if (preempt) this.preemptible--;
        if (key !== undefined) {
          const l = this.lanes.get(key);
          if (l && --l.held === 0 && !l.waiters.length) this.lanes.delete(key);
        }
        this.pump();
      },
      idle: () => {
        if (!done) this.contend();
      },
    };
  }

  /** `listen`: leave the queue as soon as the signal aborts (else it is read at the turn and the deadline). */
  private wait(w: WaitOptions, preempt: Preempt | undefined, listen: boolean): Promise<Place> {
    this.stats.waited++;
    return new Promise<Place>((resolve, reject) => {
      const waiter: Waiter = {
        key: w.key,
        preempt,
        interactive: isInteractive(),
        signal: w.signal,
        timers: [],
        resolve,
        reject,
      };
      const limit = this.o.busyTimeoutMs?.();
      if (limit !== undefined) {
        waiter.timers.push(
          setTimeout(() => {
            if (waiter.signal?.aborted) return this.abandon(waiter);
            this.drop(waiter);
            this.stats.refused++;
            reject(new DatabaseBusyError(retryAfter(limit)));
          }, limit),
        );
      }
      const grace =
        w.key !== undefined
          ? (limit ?? 2000) / 2
          : waiter.interactive
            ? Math.min(PLATFORM_GRACE_MS, (limit ?? Infinity) / 4)
            : undefined;
      if (grace !== undefined) {
        waiter.minIdle = grace;
        waiter.timers.push(
          setTimeout(() => {
            waiter.minIdle = 0;
            this.contend();
          }, grace),
        );
      }
      if (listen && w.signal) {
        waiter.onAbort = () => this.abandon(waiter);
        w.signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      if (w.key === undefined) this.platform.push(waiter);
      else this.lane(w.key).waiters.push(waiter);
      // A holder already idle for the whole grace yields now.
      if (grace !== undefined) this.contend();
    });
  }

  /** Out of the queue: timers cleared, abort listener removed. */
  private drop(w: Waiter): void {
    for (const t of w.timers) clearTimeout(t);
    w.timers.length = 0;
    if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
    if (w.key === undefined) {
      const i = this.platform.indexOf(w);
      if (i >= 0) this.platform.splice(i, 1);
      return;
    }
    const l = this.lanes.get(w.key);
    if (!l) return;
    const i = l.waiters.indexOf(w);
    if (i >= 0) l.waiters.splice(i, 1);
    if (!l.waiters.length && l.held === 0) this.lanes.delete(w.key);
  }

  /** Out of the queue because its client has gone: counted, and refused with WaitAbandonedError. */
  private abandon(w: Waiter): void {
    this.drop(w);
    this.stats.abandoned++;
    w.reject(new WaitAbandonedError());
  }

  /** The next waiter to serve: platform work first, then the key with the fewest places, longest unserved. */
  private next(): Waiter | undefined {
    if (this.platform.length) return this.platform[0];
    const cap = this.cap();
    let best: Lane | undefined;
    for (const l of this.lanes.values()) {
      if (!l.waiters.length || l.held >= cap) continue;
      if (!best || l.held < best.held || (l.held === best.held && l.turn < best.turn)) best = l;
    }
    return best?.waiters[0];
  }

  /** Give free places to waiters, in order. */
  private pump(): void {
    while (this.used < this.o.slots) {
      const w = this.next();
      if (!w) return;
      if (w.signal?.aborted) {
        this.abandon(w);
        continue;
      }
      this.drop(w);
      w.resolve(this.grant(w.key, w.preempt));
    }
  }

  /** Waiters whose grace has passed ask a preemptible holder to yield (one each). */
  private contend(): void {
    // Nobody to ask: every waiter would find no victim. Returning here keeps a full pool of
    // plain statements (each waiting HTTP request calls this) from walking every waiter
    // against every holder (bench:http keyed mail at 64 connections: 44 waiters × 20 holders).
    if (this.used < this.o.slots || this.preemptible === 0) return;
    const cap = this.cap();
    const waiting = [...this.platform, ...[...this.lanes.values()].flatMap((l) => (l.held < cap ? l.waiters : []))];
    for (const w of waiting) {
      if (w.minIdle === undefined || (w.victim && this.holders.has(w.victim))) continue;
      for (const h of this.victimsFor(w)) {
        if (!h.preempt!(w.minIdle)) continue;
        h.yielding = true;
        w.victim = h;
        this.stats.preempted++;
        break;
      }
    }
  }

  /** Holders `w` may ask to yield, the key holding most places first, then the oldest. */
  private victimsFor(w: Waiter): Holder[] {
    const held = (key: string | undefined) => (key === undefined ? 0 : (this.lanes.get(key)?.held ?? 0));
    const mine = held(w.key);
    const out: Holder[] = [];
    for (const h of this.holders) {
      if (!h.preempt || h.yielding || h.key === undefined || h.key === w.key) continue;
      if (w.key !== undefined && mine > 0 && held(h.key) < mine + 2) continue;
      out.push(h);
    }
    return out.sort((a, b) => held(b.key) - held(a.key) || a.since - b.since);
  }
}

async function holding<T>(p: Place, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } finally {
    p.release();
  }
}

/** The members of a Db that come from its wait gate, `begin` and `waitAs`: alike on both engines. */
export function gatedMembers(
  gate: WaitGate,
  begin: (opts?: TxOptions) => Promise<Tx>,
  waitAs: (w: WaitOptions) => Queryable,
): Pick<Db, 'begin' | 'waitAs' | 'cancelWaits' | 'waits' | 'transaction'> {
  return {
    begin,
    waitAs,
    cancelWaits: (key, err) => gate.cancel(key, err),
    waits: gate.stats,
    transaction: (fn, opts) => runTransaction(begin, fn, opts),
  };
}
