import postgres from 'postgres';
import type { Db, KnownStatement, Pooling, QueryResult, Queryable, Tx, TxOptions, WaitOptions } from './engine';
import {
  ANY_CHANGE,
  DatabaseBusyError,
  DatabaseUnavailableError,
  DiskFullError,
  driverCall as run,
  normalizeDbError,
} from './engine';
import { batchable } from './embedded-wire';
import { type ResolvedOptions, WirePool, type WireStatement, wireUnsupported } from './external-wire';
import type { WireOptions } from './wire/options';
import { gatedMembers, type GateOptions, type Place, WaitGate } from './wait-gate';
import { undeclared } from '../util/undeclared';

type Sql = postgres.Sql | postgres.ReservedSql;

/** An idle connection closes after this long (postgres.js's pool and the batches' alike). */
const IDLE_TIMEOUT_SECONDS = 60;

/**
 * Behind a transaction-mode pooler without database.direct_url: how often a subscription is
 * told that anything may have changed (docs/operations.md, "Scaling out").
 */
export const LISTEN_POLL_MS = 1000;

/**
 * The start-up parameters a transaction-mode pooler passes on (PgBouncer tracks these per client
 * and refuses any other, 08P01 "unsupported startup parameter"); the others are set in every
 * transaction instead (`localSettings`).
 */
const POOLER_STARTUP = new Set([
  'application_name',
  'client_encoding',
  'datestyle',
  'timezone',
  'standard_conforming_strings',
]);

/**
 * Run-time parameters split for a transaction-mode pooler: those its start-up message may carry,
 * and one statement that sets the others for the transaction it runs in
 * (`set_config(…, true)`, names and values as bind parameters), or null when there are none.
 */
export function localSettings(connection: Record<string, string>): {
  startup: Record<string, string>;
  local: KnownStatement | null;
} {
  const startup: Record<string, string> = {};
  const params: string[] = [];
  for (const [k, v] of Object.entries(connection))
    if (POOLER_STARTUP.has(k.toLowerCase())) startup[k] = v;
    else params.push(k, v);
  if (!params.length) return { startup, local: null };
  const calls = [];
  for (let i = 1; i < params.length; i += 2) calls.push(`pg_catalog.set_config($${i}, $${i + 1}, true)`);
  return { startup, local: { sql: `SELECT ${calls.join(', ')}`, params } };
}

/** A driver's result as the engine's. */
function resultOf<T>(r: postgres.RowList<postgres.Row[]>): QueryResult<T> {
  const columns = r.columns ?? [];
  return {
    rows: Array.from(r) as T[],
    rowCount: columns.length > 0 ? r.length : (r.count ?? r.length),
    fields: columns.map((c) => ({ name: c.name, typeId: c.type })),
  };
}

function queryable(sql: Sql, prepare = false): Queryable {
  return {
    query: <T>(text: string, params: unknown[] = []) =>
      run(async () => resultOf<T>(await sql.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare }))),
    exec: (text: string) => run(async () => void (await sql.unsafe(text).simple())),
  };
}

/**
 * Whether `e` (normalized) says the connection it came from is gone: the server ended it
 * (57P01 after `pg_terminate_backend`, a failover, a restart; class 08) or the socket closed.
 * Not a full disk or a busy pool: the connection is fine after those.
 */
function connectionLost(e: unknown): boolean {
  return e instanceof DatabaseUnavailableError && !(e instanceof DiskFullError) && !(e instanceof DatabaseBusyError);
}

const LOST = () => new DatabaseUnavailableError('database unreachable (CONNECTION_CLOSED)');

/**
 * A connection of the driver's pool held by one caller (a transaction, a batch sent together),
 * kept from touching the driver once the connection is gone. postgres.js 3.4.9 writes a statement
 * given to a reserved connection whose socket closed to that socket from a timer, where the
 * write throws out of reach of any caller and the process exits (porsager/postgres#1208), and
 * `release` of such a connection puts it back in the pool's open list, where the next statement
 * meets the same fate. So once a statement failed with the connection (`connectionLost`), or the
 * pool reported it closed (its `onclose`, by the id the first statement learnt), every further
 * statement is refused here as "database unavailable", and `release` leaves the connection to
 * the pool, which has already taken it back as closed and opens it again when needed.
 */
class Held {
  private lost = false;
  private id: number | undefined;
  /** Rejects when the connection is gone: what the driver had queued for it never settles. */
  private readonly lostSignal: Promise<never>;
  private signalLost: (e: unknown) => void = () => {};

  constructor(
    readonly conn: postgres.ReservedSql,
    private readonly closing: Map<number, Set<Held>>,
  ) {
    this.lostSignal = new Promise<never>((_, reject) => {
      this.signalLost = reject;
    });
    this.lostSignal.catch(() => {});
  }

  /**
   * Run `fn` on the connection unless it is gone; a connection-level failure marks it gone. It
   * settles when the connection goes: a statement the driver queued behind another on a held
   * connection is never answered once its socket closed.
   */
  async run<T>(fn: (conn: postgres.ReservedSql) => Promise<T>): Promise<T> {
    if (this.lost) throw LOST();
    try {
      return await Promise.race([fn(this.conn), this.lostSignal]);
    } catch (e) {
      const n = normalizeDbError(e);
      if (connectionLost(n)) this.gone();
      throw n;
    }
  }

  /**
   * Options of the first statement: the driver hands it the connection as it writes it
   * (`onexecute`, as its own `sql.begin` does), whose id its `onclose` reports.
   */
  readonly first = {
    onexecute: (c: { id: number }) => {
      this.id = c.id;
      const set = this.closing.get(c.id) ?? new Set<Held>();
      set.add(this);
      this.closing.set(c.id, set);
      return true;
    },
  } as Record<string, unknown>;

  gone(): void {
    this.lost = true;
    this.forget();
    this.signalLost(LOST());
  }

  release(): void {
    this.forget();
    if (!this.lost) this.conn.release();
  }

  private forget(): void {
    if (this.id !== undefined) this.closing.get(this.id)?.delete(this);
  }
}

/** Redact the password of a connection URL for messages. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `PostgreSQL at ${u.hostname}:${u.port || 5432}/${u.pathname.slice(1) || u.username}`;
  } catch {
    return 'PostgreSQL (unparseable URL)';
  }
}

export interface ExternalOptions {
  max?: number;
  connectTimeoutSeconds?: number;
  onNotice?: (msg: string) => void;
  /** Run-time parameters set when each connection starts (e.g. statement_timeout). */
  connection?: Record<string, string>;
  /**
   * Keep parameterized statements prepared per connection (one round trip instead of
   * describe + execute). For pools whose statement texts are few and repeated.
   */
  prepare?: boolean;
  /** How long work waits for a free connection (src/db/wait-gate.ts); no bound when omitted. */
  busyTimeoutMs?: GateOptions['busyTimeoutMs'];
  /** The largest share of the connections one API key may hold (0..1]. */
  keyShare?: GateOptions['keyShare'];
  /**
   * database.pooler: `transaction` when `url` reaches a transaction-mode pooler. Then no
   * statement stays prepared across transactions (the driver's and the wire path's are
   * unnamed), `connection` parameters the pooler does not pass on are set in each transaction,
   * and LISTEN goes to `directUrl`, or is polled without it.
   */
  pooler?: 'none' | 'transaction';
  /** database.direct_url: the same database past the pooler, for LISTEN. */
  directUrl?: string;
  /** Look for a pooler in front of `url` at open (`detectPooler`; the platform's pool). */
  detect?: boolean;
}

/**
 * Whether `url` reaches PgBouncer (or a pooler that does as it does), told without side
 * effects: one connection asks for a custom start-up parameter, which PostgreSQL takes as a
 * placeholder setting and PgBouncer refuses ("unsupported startup parameter"). Its pool_mode is
 * not visible from a client connection (SHOW pool_mode reaches PostgreSQL), so the operator's
 * database.pooler still says it. Undefined when nothing was found (or the probe failed).
 */
export async function detectPooler(url: string, connectTimeoutSeconds: number): Promise<string | undefined> {
  const probe = postgres(url, {
    max: 1,
    connect_timeout: connectTimeoutSeconds,
    onnotice: () => {},
    connection: { application_name: 'basalt-probe', 'basalt.pooler_probe': 'on' },
  });
  try {
    await probe`select 1`;
    return undefined;
  } catch (e) {
    const msg = String((e as Error).message ?? '');
    return msg.includes('unsupported startup parameter') ? 'PgBouncer (it refused a start-up parameter)' : undefined;
  } finally {
    await probe.end({ timeout: 1 }).catch(() => {});
  }
}

export async function openExternal(url: string, opts: ExternalOptions = {}): Promise<Db> {
  const pooled = opts.pooler === 'transaction';
  const prepare = !pooled && (opts.prepare ?? false);
  const connection = { application_name: 'basalt', ...opts.connection };
  const { startup, local } = pooled ? localSettings(connection) : { startup: connection, local: null };
  const max = opts.max ?? 20;
  const connectTimeoutSeconds = opts.connectTimeoutSeconds ?? 5;
  /** Held connections by the pool's connection id, told when the pool reports it closed. */
  const closing = new Map<number, Set<Held>>();
  const sql = postgres(url, {
    max,
    // The driver's own statements (sql`…`: notify, the array types it fetches) too: unnamed behind a pooler.
    prepare: !pooled,
    connect_timeout: connectTimeoutSeconds,
    idle_timeout: IDLE_TIMEOUT_SECONDS,
    onnotice: () => {},
    types: {
      // JSON parameters are JSON text on both engines (callers stringify and cast `$n::jsonb`);
      // the driver's default would stringify a string a second time.
      json: {
        to: 3802,
        from: [114, 3802],
        serialize: (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v)),
        parse: (v: string) => JSON.parse(v),
      },
      // Same representation as the embedded engine: timestamps as Date, bytea as Uint8Array.
      bytea: {
        to: 17,
        from: [17],
        serialize: (v: Uint8Array) => '\\x' + Buffer.from(v).toString('hex'),
        parse: (v: string) => new Uint8Array(Buffer.from(v.slice(2), 'hex')),
      },
    },
    connection: startup,
    onclose: (id) => {
      const held = closing.get(id);
      closing.delete(id);
      for (const h of held ?? []) h.gone();
    },
  });
  // Fail fast with a clear cause when the server is not there.
  await run(() => sql`select 1`);
  // The driver fetches the array types on every new connection, as a promise nobody awaits: a
  // backend ended during that fetch rejects it unhandled, which `basalt serve` survives as a
  // database error (src/process-guard.ts). Not fetching them (fetch_types: false) is no way out
  // in postgres.js 3.4.9: a reserve() that opens a connection then waits forever.
  const direct = queryable(sql, prepare);
  // As many places as connections: the driver's own queue (unbounded, unfair) never fills.
  const gate = new WaitGate({ slots: max, busyTimeoutMs: opts.busyTimeoutMs, keyShare: opts.keyShare });
  const waitAs = (w: WaitOptions): Queryable => ({
    // Behind a transaction-mode pooler with settings to make: a transaction of its own that makes them.
    query: local
      ? async <T>(text: string, params: unknown[] = []) =>
          (await atOnce([{ sql: text, params }], w))[0] as QueryResult<T>
      : (text, params) => gate.run(w, () => direct.query(text, params)),
    exec: (text) => gate.run(w, () => direct.exec(text)),
  });
  const base = waitAs({});

  async function begin(opts: TxOptions = {}): Promise<Tx> {
    const place = await gate.acquire(opts, opts.preempt);
    const pool = opts.onWire ? wire : null;
    if (pool)
      try {
        return await wireTx(pool, place, opts.setup ?? [], opts.maxAnswerBytes);
      } catch (e) {
        if (!offWire(pool, e)) {
          place.release();
          throw normalizeDbError(e);
        }
      }
    let held: Held;
    try {
      held = new Held(await run(() => sql.reserve()), closing);
    } catch (e) {
      place.release();
      throw e;
    }
    const free = () => {
      held.release();
      place.release();
    };
    const q: Queryable = {
      query: <T>(text: string, params: unknown[] = []) =>
        held.run(async (c) =>
          resultOf<T>(await c.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare })),
        ),
      exec: (text: string) => held.run(async (c) => void (await c.unsafe(text).simple())),
    };
    let closed = false;
    const end = async (stmt: 'COMMIT' | 'ROLLBACK') => {
      if (closed) return;
      closed = true;
      try {
        await q.exec(stmt);
      } finally {
        free();
      }
    };
    // One round trip: BEGIN and the setup statements as one simple-protocol batch (after the
    // pooler's settings, sent with it).
    const setup = opts.setup ?? [];
    const began = held.run(
      async (c) => void (await c.unsafe(local ? 'BEGIN' : ['BEGIN', ...setup].join('; '), [], held.first)),
    );
    const made = local
      ? [
          held.run(
            async (c) =>
              void (await c.unsafe(local.sql, local.params as postgres.ParameterOrJSON<never>[], { prepare })),
          ),
          ...(setup.length ? [held.run(async (c) => void (await c.unsafe(setup.join('; ')).simple()))] : []),
        ]
      : [];
    const failed = async (e: unknown): Promise<never> => {
      closed = true;
      await q.exec('ROLLBACK').catch(() => {}); // the failure being thrown matters; a broken connection is dropped by the driver
      free();
      throw e;
    };
    await Promise.all([began, ...made]).catch(failed);
    return {
      ...q,
      get closed() {
        return closed;
      },
      idle: place.idle,
      commit: () => end('COMMIT'),
      // A rollback that fails leaves nothing: the server rolls back a transaction whose connection failed.
      rollback: () => end('ROLLBACK').catch(() => {}),
    };
  }

  /**
   * A transaction on a connection of the wire path (`TxOptions.onWire`): BEGIN and the setup in
   * one batch, each statement then a batch of its own (Bind, Execute, Sync: one write, one round
   * trip, prepared per connection as the driver's are), COMMIT or ROLLBACK a last one. The Syncs
   * end no transaction: BEGIN opened one. Operations run one after another on the connection
   * whoever calls them. Values must be `batchable` (every Database API statement's are).
   */
  async function wireTx(pool: WirePool, place: Place, setup: readonly string[], maxAnswerBytes = 0): Promise<Tx> {
    const conn = await pool.reserve();
    let last: Promise<unknown> = Promise.resolve();
    // Inside BEGIN: a statement gone stale is not run again (its error aborted the transaction).
    const inTx: WireOptions = { inTransaction: true, maxAnswerBytes };
    const send = (statements: WireStatement[]): Promise<QueryResult[]> => {
      const r = last.then(() => run(() => conn.batch(statements, inTx)));
      last = r.catch(() => {}); // only orders the statements; `r`'s caller gets its error
      return r;
    };
    let closed = false;
    const free = () => {
      pool.release(conn);
      place.release();
    };
    const end = async (stmt: 'COMMIT' | 'ROLLBACK') => {
      if (closed) return;
      closed = true;
      try {
        await send([{ sql: stmt, params: [] }]);
      } finally {
        free();
      }
    };
    try {
      await send([
        { sql: 'BEGIN', params: [] },
        ...(local ? [local] : []),
        ...setup.map((sql) => ({ sql, params: [] })),
      ]);
    } catch (e) {
      // A setup statement refused: the transaction BEGIN opened is aborted, and ends here.
      closed = true;
      await send([{ sql: 'ROLLBACK', params: [] }]).catch(() => {}); // the setup's failure is the one thrown
      free();
      throw e;
    }
    const one = async <T>(sql: string, params: unknown[]) => (await send([{ sql, params }]))[0] as QueryResult<T>;
    return {
      query: <T>(sql: string, params: unknown[] = []) => {
        if (!batchable(params))
          return Promise.reject(new Error('a transaction on the wire path takes strings, finite numbers and nulls'));
        return one<T>(sql, params);
      },
      exec: async (sql: string) => void (await one(sql, [])),
      get closed() {
        return closed;
      },
      idle: place.idle,
      commit: () => end('COMMIT'),
      // As above: a connection whose rollback failed is broken, and the server rolls back for it.
      rollback: () => end('ROLLBACK').catch(() => {}),
    };
  }

  // Batches known up front on connections of their own, one Sync per batch (src/db/external-wire.ts),
  // unless the URL asks for what that path does not speak.
  const resolved = undeclared<ResolvedOptions>(sql.options);
  let wire: WirePool | null = wireUnsupported(resolved)
    ? null
    : new WirePool(resolved, {
        connectTimeoutMs: connectTimeoutSeconds * 1000,
        idleTimeoutMs: IDLE_TIMEOUT_SECONDS * 1000,
        unnamed: pooled,
      });

  /**
   * Whether `e` says the wire path cannot connect (an authentication method it does not speak):
   * then `pool` is closed and the driver serves from now on (begin and atOnce alike).
   */
  function offWire(pool: WirePool, e: unknown): boolean {
    if ((e as { code?: string }).code !== 'UNSUPPORTED_AUTH') return false;
    wire = null;
    pool.close();
    return true;
  }

  /**
   * Statements known up front, as one transaction of their own. With plain values (`batchable`:
   * strings, finite numbers, nulls) on the wire path: the statements and a single Sync, an
   * implicit transaction, in one write (src/db/external-wire.ts). Otherwise, or where that path
   * cannot connect (an authentication method it does not speak): a statement on its own is a
   * query of the pool (its own implicit transaction, as a batch of one would be); several go out
   * as BEGIN, the statements and COMMIT together on one connection (one round trip), which runs
   * them in the order sent; a failed statement makes COMMIT a rollback. The first error is thrown
   * (a statement after a failed one fails only because the transaction was aborted). Straight on
   * the driver: no Tx.
   */
  async function atOnce(statements: readonly KnownStatement[], wait: WaitOptions = {}): Promise<QueryResult[]> {
    const pool = wire;
    if (pool && statements.every((st) => batchable(st.params))) {
      try {
        if (!local) return await gate.run(wait, () => run(() => pool.batch(statements, wait)));
        return (await gate.run(wait, () => run(() => pool.batch([local, ...statements], wait)))).slice(1);
      } catch (e) {
        if (!offWire(pool, e)) throw e;
      }
    }
    if (statements.length === 1 && !local) return [await waitAs(wait).query(statements[0]!.sql, statements[0]!.params)];
    const place = await gate.acquire(wait);
    let held: Held;
    try {
      held = new Held(await sql.reserve(), closing);
    } catch (e) {
      place.release();
      throw normalizeDbError(e);
    }
    // All written at once (run calls the driver before its first await), in this order.
    const sent: Promise<postgres.RowList<postgres.Row[]>>[] = [
      held.run((c) => c.unsafe('BEGIN', [], held.first).simple()),
    ];
    const first = local ? 2 : 1;
    if (local)
      sent.push(held.run((c) => c.unsafe(local.sql, local.params as postgres.ParameterOrJSON<never>[], { prepare })));
    for (const st of statements)
      sent.push(held.run((c) => c.unsafe(st.sql, st.params as postgres.ParameterOrJSON<never>[], { prepare })));
    sent.push(held.run((c) => c.unsafe('COMMIT').simple()));
    const settled = await Promise.allSettled(sent);
    try {
      const failures = settled.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
      if (failures.length) {
        // COMMIT did not answer (the connection failed): what is open there ends before the connection is reused.
        const uncommitted = settled[settled.length - 1]!.status === 'rejected';
        // The failure below is thrown; a broken connection is dropped.
        if (uncommitted) await held.run((c) => c.unsafe('ROLLBACK').simple()).catch(() => {});
        throw failures[0];
      }
    } finally {
      held.release();
      place.release();
    }
    const out: QueryResult[] = [];
    for (let i = first; i < settled.length - 1; i++)
      out.push(resultOf((settled[i] as PromiseFulfilledResult<postgres.RowList<postgres.Row[]>>).value));
    return out;
  }

  /**
   * Where LISTEN goes: the pool's URL, unless that is a transaction-mode pooler (a LISTEN there
   * lasts one transaction of a server connection others then use): database.direct_url, the
   * driver's one listening connection to it opened on the first LISTEN; without one, polled.
   */
  const pooling: Pooling = {
    pooler: pooled ? 'transaction' : 'none',
    notifications: !pooled ? 'session' : opts.directUrl ? 'direct' : 'polled',
    pollMs: LISTEN_POLL_MS,
    detected: opts.detect ? await detectPooler(url, connectTimeoutSeconds) : undefined,
  };
  let listener: postgres.Sql | undefined;
  const listenOn = (): postgres.Sql | null => {
    if (!pooled) return sql;
    if (!opts.directUrl) return null;
    listener ??= postgres(opts.directUrl, {
      max: 1,
      connect_timeout: connectTimeoutSeconds,
      onnotice: () => {},
      connection: { application_name: `${connection.application_name}-listen` },
    });
    return listener;
  };

  return {
    kind: 'external',
    describe: describeUrl(url),
    pooling,
    ...base,
    ...gatedMembers(gate, begin, waitAs),
    atOnce,
    listen: (channel, cb) => {
      const on = listenOn();
      if (!on) {
        const t = setInterval(() => cb(ANY_CHANGE), LISTEN_POLL_MS);
        t.unref?.();
        return Promise.resolve(async () => clearInterval(t));
      }
      return run(async () => {
        const sub = await on.listen(channel, cb);
        return async () => void (await sub.unlisten());
      });
    },
    notify: (channel, payload) => gate.run({}, () => run(async () => void (await sql.notify(channel, payload)))),
    close: async () => {
      wire?.close();
      await Promise.all([sql.end({ timeout: 5 }), listener?.end({ timeout: 5 })]);
    },
  };
}
