/**
 * Open Database API transactions: each one spans several HTTP requests, belongs to
 * the API key that began it, and is rolled back when idle too long.
 *
 * - Queries on one transaction run in arrival order: every operation is appended
 *   to the transaction's promise chain, so two requests never use its connection
 *   at once.
 * - A failed query marks it aborted (Postgres refuses everything after an error);
 *   commit then rolls back and answers 409 transaction_aborted.
 * - The idle timer is re-armed when an operation ends; if it fires while one runs,
 *   the rollback waits for it. A rolled-back or ended id is forgotten, so it
 *   answers 404 afterwards.
 * - Once the instance stops (`close`), no transaction opens: a begin still waiting for
 *   a connection (on the embedded engine, for the open transaction that holds it)
 *   answers 503 shutting_down instead of holding the database until its idle timeout,
 *   and so does a request on an id that is gone.
 * - Waiting for the database is bounded and fair (src/db/wait-gate.ts): begins still
 *   waiting count toward the key's cap; a begin whose client went away never starts
 *   (and one that started as it left is rolled back at once); revoking the key refuses
 *   its waiting begins. Whatever its activity, a transaction ends after
 *   db.transaction_max_lifetime_ms; an idle one gives the database back when other work
 *   has waited long enough for it (`preempt`). Both answer 409 transaction_aborted on
 *   their id afterwards, saying why (docs/database.md, "Waiting for the database").
 */
import { WaitAbandonedError, type Queryable, type Tx } from '../../db/engine';
import { Errors } from '../../http/errors';
import { DbErrors } from './errors';

/** Why the platform itself ended a transaction (its id then answers 409 saying so). */
type EndReason = 'preempted' | 'lifetime';
/** Ended ids remembered for their answer; the oldest are forgotten past this many. */
const REMEMBERED = 10_000;

interface Entry {
  id: string;
  keyId: string;
  /** The session of a user's transaction (ended with it: `rollbackOwned`). */
  session?: string;
  tx: Tx;
  chain: Promise<unknown>;
  busy: number;
  aborted: boolean;
  ended: boolean;
  expiresAt: number;
  /** performance.now() when its last operation ended (or it began). */
  idleSince: number;
  timer?: ReturnType<typeof setTimeout>;
  lifeTimer?: ReturnType<typeof setTimeout>;
}

/** How a begin waits: for its key, while its client is there, yielding when idle and asked. */
export interface BeginWait {
  key: string;
  signal: AbortSignal;
  preempt: (minIdleMs: number) => boolean;
}

export interface RegistryOptions {
  /** Open a long-lived transaction running `setup` after BEGIN. */
  begin: (setup: string[], wait: BeginWait) => Promise<Tx>;
  idleTimeoutMs: () => number;
  maxLifetimeMs: () => number;
  maxPerKey: () => number;
  /** Statements run right after BEGIN (timeouts). */
  setup: () => string[];
  onError?: (msg: string, cause: unknown) => void;
}

export class TransactionRegistry {
  private readonly open = new Map<string, Entry>();
  /** Begins waiting for the database: their key, and how to refuse them (revocation, stop). */
  private readonly waiting = new Set<{ keyId: string; ctl: AbortController }>();
  /** Ids the platform ended itself, with their key and why. */
  private readonly ended = new Map<string, { keyId: string; reason: EndReason }>();
  private closing = false;
  /** Transactions opened since start (exported at /metrics). */
  begun = 0;

  constructor(private readonly opts: RegistryOptions) {}

  /** Open transactions (all keys). */
  get size(): number {
    return this.open.size;
  }

  /** Open transactions of a key, and its begins still waiting for the database. */
  private countFor(keyId: string): number {
    let n = 0;
    for (const e of this.open.values()) if (e.keyId === keyId) n++;
    for (const w of this.waiting) if (w.keyId === keyId) n++;
    return n;
  }

  /**
   * Open a transaction owned by `keyId` (a key's id, or a user's owner id). `init` runs
   * first in it, e.g. taking a user's identity (identity.ts); if it fails, nothing opens.
   * `signal`: the request's; a begin whose client has gone never starts. `session`: the
   * user's session it belongs to, if any.
   */
  async begin(
    keyId: string,
    init?: (tx: Queryable) => Promise<void>,
    signal?: AbortSignal,
    session?: string,
  ): Promise<{ id: string; expiresAt: Date }> {
    if (this.closing) throw DbErrors.shuttingDown();
    const max = this.opts.maxPerKey();
    if (this.countFor(keyId) >= max) throw DbErrors.tooManyTx(max);
    const waiting = { keyId, ctl: new AbortController() };
    this.waiting.add(waiting);
    let entry: Entry | undefined;
    let tx: Tx;
    try {
      tx = await this.opts.begin(this.opts.setup(), {
        key: keyId,
        signal: signal ? AbortSignal.any([signal, waiting.ctl.signal]) : waiting.ctl.signal,
        preempt: (minIdleMs) => (entry ? this.preempt(entry, minIdleMs) : false),
      });
    } catch (err) {
      // Refused while it waited: the reason given (the key revoked, the instance stopping).
      throw waiting.ctl.signal.aborted ? waiting.ctl.signal.reason : err;
    } finally {
      this.waiting.delete(waiting);
    }
    if (init)
      try {
        await init(tx);
      } catch (e) {
        await tx.rollback();
        throw e;
      }
    if (this.closing) {
      await tx.rollback();
      throw DbErrors.shuttingDown();
    }
    // The client left (or the key was revoked) while BEGIN ran: nobody will use it.
    if (signal?.aborted || waiting.ctl.signal.aborted) {
      await tx.rollback();
      throw waiting.ctl.signal.aborted ? waiting.ctl.signal.reason : new WaitAbandonedError();
    }
    const e: Entry = {
      id: crypto.randomUUID(),
      keyId,
      session,
      tx,
      chain: Promise.resolve(),
      busy: 0,
      aborted: false,
      ended: false,
      expiresAt: 0,
      idleSince: performance.now(),
    };
    entry = e;
    this.begun++;
    this.open.set(e.id, e);
    this.arm(e);
    e.lifeTimer = setTimeout(() => this.endByPlatform(e, 'lifetime'), this.opts.maxLifetimeMs());
    (e.lifeTimer as { unref?: () => void }).unref?.();
    return { id: e.id, expiresAt: new Date(e.expiresAt) };
  }

  private find(id: string, keyId: string, session: string | undefined): Entry {
    const e = this.open.get(id);
    // Another key's transaction answers exactly like an unknown one: ids are not confirmed to strangers.
    // So does a user's transaction asked from another of the user's sessions: it runs with the
    // claims (aal, amr) of the session that began it, which the asking one may not hold.
    // Once the instance stops, every id answers that, which tells why the transaction is gone.
    if (!e || e.ended || e.keyId !== keyId || e.session !== session) throw this.gone(id, keyId);
    return e;
  }

  /** The answer for an id that is not open (for this key). */
  private gone(id: string, keyId: string) {
    if (this.closing) return DbErrors.shuttingDown();
    const why = this.ended.get(id);
    if (why?.keyId !== keyId) return DbErrors.txNotFound();
    return why.reason === 'preempted' ? DbErrors.txPreempted() : DbErrors.txOutlived(this.opts.maxLifetimeMs());
  }

  /** Asked by the wait gate to give the database back: one idle long enough ends, a busy one is kept. */
  private preempt(e: Entry, minIdleMs: number): boolean {
    if (e.ended || e.busy > 0 || performance.now() - e.idleSince < minIdleMs) return false;
    this.endByPlatform(e, 'preempted');
    return true;
  }

  /**
   * End a transaction the platform decided to end (preempted, lifetime over): its id
   * answers why from now on; the rollback runs once the statement running now, if any, ends.
   */
  private endByPlatform(e: Entry, reason: EndReason): void {
    if (e.ended) return;
    this.retire(e);
    this.ended.set(e.id, { keyId: e.keyId, reason });
    if (this.ended.size > REMEMBERED) this.ended.delete(this.ended.keys().next().value!);
    void e.chain
      .then(() => e.tx.rollback())
      .catch((err) => this.opts.onError?.(`rollback of a ${reason} transaction failed`, err));
  }

  /** Mark ended and forget: timers stopped, out of the open list. */
  private retire(e: Entry): void {
    e.ended = true;
    this.open.delete(e.id);
    if (e.timer) clearTimeout(e.timer);
    if (e.lifeTimer) clearTimeout(e.lifeTimer);
  }

  private arm(e: Entry): void {
    if (e.timer) clearTimeout(e.timer);
    const ms = this.opts.idleTimeoutMs();
    e.expiresAt = Date.now() + ms;
    e.timer = setTimeout(() => this.expire(e), ms);
    // An idle transaction must not keep the process alive on its own.
    (e.timer as { unref?: () => void }).unref?.();
  }

  private expire(e: Entry): void {
    if (e.ended) return;
    if (e.busy > 0) {
      this.arm(e);
      return;
    }
    void this.finish(e, false).catch((err) => this.opts.onError?.('idle transaction rollback failed', err));
  }

  /** Append `fn` to the transaction's chain, so operations run one at a time in arrival order. */
  private enqueue<R>(e: Entry, fn: () => Promise<R>): Promise<R> {
    e.busy++;
    const run = e.chain.then(fn);
    e.chain = run.catch(() => {}); // the chain only orders operations; `run`'s caller gets its error
    return run.finally(() => {
      e.busy--;
      if (e.ended) return;
      this.arm(e);
      // Between statements again: work waiting for the database may ask it to yield.
      if (e.busy === 0) {
        e.idleSince = performance.now();
        e.tx.idle?.();
      }
    });
  }

  private async finish(e: Entry, commit: boolean): Promise<void> {
    if (e.ended) return;
    this.retire(e);
    if (commit) await e.tx.commit();
    else await e.tx.rollback();
  }

  /**
   * The transaction's connection, wrapped so that a statement Postgres refuses marks
   * the transaction aborted (Postgres ignores everything after it until rollback).
   * A request refused before any statement ran (validation) leaves it usable.
   */
  private watched(e: Entry): Queryable {
    const mark = (err: unknown): never => {
      e.aborted = true;
      throw err;
    };
    return {
      query: <T>(sql: string, params?: unknown[]) => e.tx.query<T>(sql, params).catch(mark),
      exec: (sql) => e.tx.exec(sql).catch(mark),
    };
  }

  /**
   * Run `fn` with the transaction's connection, after the operations queued before it. The id
   * must belong to `keyId`, and, for a user's, to the `session` that began it.
   */
  run<R>(id: string, keyId: string, session: string | undefined, fn: (q: Queryable) => Promise<R>): Promise<R> {
    const e = this.find(id, keyId, session);
    return this.enqueue(e, async () => {
      if (e.ended) throw this.gone(id, keyId);
      if (e.aborted) throw DbErrors.txAborted();
      return fn(this.watched(e));
    });
  }

  /** Commit; an aborted transaction is rolled back instead and answers 409 transaction_aborted. */
  commit(id: string, keyId: string, session?: string): Promise<void> {
    const e = this.find(id, keyId, session);
    return this.enqueue(e, async () => {
      if (e.ended) throw this.gone(id, keyId);
      if (e.aborted) {
        await this.finish(e, false);
        throw DbErrors.txAborted();
      }
      await this.finish(e, true);
    });
  }

  rollback(id: string, keyId: string, session?: string): Promise<void> {
    const e = this.find(id, keyId, session);
    return this.enqueue(e, async () => {
      if (e.ended) throw this.gone(id, keyId);
      await this.finish(e, false);
    });
  }

  /**
   * Roll back every open transaction of `keyId` (its key was revoked): its begins still
   * waiting never start, and its open transactions end (`rollbackWhere`).
   */
  rollbackKey(keyId: string): Promise<number> {
    for (const w of this.waiting) if (w.keyId === keyId) w.ctl.abort(Errors.unauthorized());
    return this.rollbackWhere((e) => e.owner === keyId);
  }

  /**
   * Roll back the open transactions `which` picks (their credentials ended: a key revoked,
   * a user's session revoked). Their ids answer 404 at once, operations queued behind a
   * running one are refused, and the rollback runs as soon as the statement running now
   * (if any) ends, releasing its locks.
   */
  async rollbackWhere(which: (e: { owner: string; session?: string }) => boolean): Promise<number> {
    const picked = [...this.open.values()].filter((e) => !e.ended && which({ owner: e.keyId, session: e.session }));
    await Promise.all(
      picked.map((e) => {
        this.retire(e);
        return e.chain
          .then(() => e.tx.rollback())
          .catch((err) => this.opts.onError?.('rollback of a transaction whose credentials ended failed', err));
      }),
    );
    return picked.length;
  }

  /** The sessions of the open transactions `owner` holds. */
  sessionsOf(owner: string): Set<string> {
    const out = new Set<string>();
    for (const e of this.open.values()) if (e.keyId === owner && !e.ended && e.session) out.add(e.session);
    return out;
  }

  /**
   * The instance stops (while it still answers the requests in flight): no transaction
   * opens from now on, and each open one is rolled back once the operations already
   * queued on it have run, so a commit in flight still commits. What waited for the
   * database behind them then runs, and the requests in flight drain.
   */
  async close(): Promise<void> {
    this.closing = true;
    for (const w of this.waiting) w.ctl.abort(DbErrors.shuttingDown());
    await Promise.all(
      [...this.open.values()].map((e) =>
        this.enqueue(e, () => this.finish(e, false)).catch((err) =>
          this.opts.onError?.('rollback on shutdown failed', err),
        ),
      ),
    );
  }

  /** Roll back everything (shutdown). */
  async rollbackAll(): Promise<void> {
    await Promise.all(
      [...this.open.values()].map((e) =>
        this.finish(e, false).catch((err) => this.opts.onError?.('rollback on shutdown failed', err)),
      ),
    );
  }
}
