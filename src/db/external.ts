import postgres from 'postgres';
import type { Db, KnownStatement, QueryResult, Queryable, Tx, TxOptions, WaitOptions } from './engine';
import { driverCall as run, normalizeDbError } from './engine';
import { batchable } from './embedded-wire';
import { type ResolvedOptions, WirePool, type WireStatement, wireUnsupported } from './external-wire';
import { gatedMembers, type GateOptions, type Place, WaitGate } from './wait-gate';
import { undeclared } from '../util/undeclared';

type Sql = postgres.Sql | postgres.ReservedSql;

/** An idle connection closes after this long (postgres.js's pool and the batches' alike). */
const IDLE_TIMEOUT_SECONDS = 60;

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
}

export async function openExternal(url: string, opts: ExternalOptions = {}): Promise<Db> {
  const prepare = opts.prepare ?? false;
  const max = opts.max ?? 20;
  const connectTimeoutSeconds = opts.connectTimeoutSeconds ?? 5;
  const sql = postgres(url, {
    max,
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
    connection: { application_name: 'basalt', ...opts.connection },
  });
  // Fail fast with a clear cause when the server is not there.
  await run(() => sql`select 1`);
  const direct = queryable(sql, prepare);
  // As many places as connections: the driver's own queue (unbounded, unfair) never fills.
  const gate = new WaitGate({ slots: max, busyTimeoutMs: opts.busyTimeoutMs, keyShare: opts.keyShare });
  const waitAs = (w: WaitOptions): Queryable => ({
    query: (text, params) => gate.run(w, () => direct.query(text, params)),
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
    let conn: postgres.ReservedSql;
    try {
      conn = await run(() => sql.reserve());
    } catch (e) {
      place.release();
      throw e;
    }
    const free = () => {
      conn.release();
      place.release();
    };
    const q = queryable(conn, prepare);
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
    // One round trip: BEGIN and the setup statements as one simple-protocol batch.
    const began = q.exec(['BEGIN', ...(opts.setup ?? [])].join('; '));
    const failed = async (e: unknown): Promise<never> => {
      closed = true;
      await q.exec('ROLLBACK').catch(() => {}); // the failure being thrown matters; a broken connection is dropped by the driver
      free();
      throw e;
    };
    await began.catch(failed);
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
    const send = (statements: WireStatement[]): Promise<QueryResult[]> => {
      const r = last.then(() => run(() => conn.batch(statements, true, maxAnswerBytes)));
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
      await send([{ sql: 'BEGIN', params: [] }, ...setup.map((sql) => ({ sql, params: [] }))]);
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
        return await gate.run(wait, () => run(() => pool.batch(statements, wait.maxAnswerBytes)));
      } catch (e) {
        if (!offWire(pool, e)) throw e;
      }
    }
    if (statements.length === 1) return [await waitAs(wait).query(statements[0]!.sql, statements[0]!.params)];
    const place = await gate.acquire(wait);
    let conn: postgres.ReservedSql;
    try {
      conn = await sql.reserve();
    } catch (e) {
      place.release();
      throw normalizeDbError(e);
    }
    const sent: Promise<postgres.RowList<postgres.Row[]>>[] = [conn.unsafe('BEGIN').simple()];
    for (const st of statements)
      sent.push(conn.unsafe(st.sql, st.params as postgres.ParameterOrJSON<never>[], { prepare }));
    sent.push(conn.unsafe('COMMIT').simple());
    const settled = await Promise.allSettled(sent);
    try {
      const failure = settled.find((r) => r.status === 'rejected');
      if (failure) {
        // COMMIT did not answer (the connection failed): what is open there ends before the connection is reused.
        const uncommitted = settled[settled.length - 1]!.status === 'rejected';
        if (uncommitted)
          await conn
            .unsafe('ROLLBACK')
            .simple()
            .catch(() => {}); // the failure below is thrown; a broken connection is dropped
        throw normalizeDbError((failure as PromiseRejectedResult).reason);
      }
    } finally {
      conn.release();
      place.release();
    }
    const out: QueryResult[] = [];
    for (let i = 1; i < settled.length - 1; i++)
      out.push(resultOf((settled[i] as PromiseFulfilledResult<postgres.RowList<postgres.Row[]>>).value));
    return out;
  }

  return {
    kind: 'external',
    describe: describeUrl(url),
    ...base,
    ...gatedMembers(gate, begin, waitAs),
    atOnce,
    listen: (channel, cb) =>
      run(async () => {
        const sub = await sql.listen(channel, cb);
        return async () => void (await sub.unlisten());
      }),
    notify: (channel, payload) => gate.run({}, () => run(async () => void (await sql.notify(channel, payload)))),
    close: () => {
      wire?.close();
      return sql.end({ timeout: 5 });
    },
  };
}
