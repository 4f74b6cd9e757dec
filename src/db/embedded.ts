import { PGlite, types } from '@electric-sql/pglite';
// Embedded as files so `bun build --compile` carries them; PGlite cannot find them under /$bunfs/ by itself.
import wasmPath from '@electric-sql/pglite/pglite.wasm' with { type: 'file' };
import initdbPath from '@electric-sql/pglite/initdb.wasm' with { type: 'file' };
import dataPath from '@electric-sql/pglite/pglite.data' with { type: 'file' };
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Db, QueryResult, Queryable, Tx, TxOptions, WaitOptions } from './engine';
import { driverCall as run, normalizeDbError, runTransaction } from './engine';
import { installEmbeddedGuard } from './embedded-guard';
import { type GateOptions, type Place, WaitGate } from './wait-gate';

// Same representation as the external driver: int8 and numeric stay strings.
const parsers = {
  [types.INT8]: (v: string) => v,
  [types.NUMERIC]: (v: string) => v,
};

function wrap<T>(r: {
  rows: T[];
  affectedRows?: number;
  fields: { name: string; dataTypeID: number }[];
}): QueryResult<T> {
  return {
    rows: r.rows,
    rowCount: r.fields.length > 0 ? r.rows.length : (r.affectedRows ?? r.rows.length),
    fields: r.fields.map((f) => ({ name: f.name, typeId: f.dataTypeID })),
  };
}

type PgTx = { query: PGlite['query']; exec: PGlite['exec']; rollback(): Promise<void>; closed: boolean };

function queryable(target: { query: PGlite['query']; exec: PGlite['exec'] }): Queryable {
  return {
    query: <T>(sql: string, params: unknown[] = []) => run(async () => wrap<T>(await target.query<T>(sql, params))),
    exec: (sql: string) => run(async () => void (await target.exec(sql))),
  };
}

/** `busyTimeoutMs`: how long work waits for the one session (src/db/wait-gate.ts); no bound when omitted. */
export async function openEmbedded(dir: string, opts: Pick<GateOptions, 'busyTimeoutMs'> = {}): Promise<Db> {
  mkdirSync(dir, { recursive: true });
  const firstRun = !existsSync(join(dir, 'PG_VERSION'));
  const [pgliteWasmModule, initdbWasmModule] = await Promise.all([
    WebAssembly.compile(await Bun.file(wasmPath).arrayBuffer()),
    WebAssembly.compile(await Bun.file(initdbPath).arrayBuffer()),
  ]);
  const pg = await PGlite.create(dir, {
    pgliteWasmModule,
    initdbWasmModule,
    fsBundle: Bun.file(dataPath),
    parsers,
  });
  // initdb's WebAssembly heap (hundreds of MiB) is garbage once the cluster exists, but
  // the collector may keep it for the life of the process; it stays reachable for a
  // moment after create() returns, so collect it shortly after (measured: ~700 → ~300 MiB).
  if (firstRun) setTimeout(() => Bun.gc(true), 1500).unref();
  // A JS stack overflow inside the WebAssembly must end as a PostgreSQL error, never as
  // a session left with dangling error state (src/db/embedded-guard.ts).
  try {
    installEmbeddedGuard(pg);
  } catch (e) {
    await pg.close().catch(() => {});
    throw e;
  }
  const direct = queryable(pg);
  // One session: work takes the gate's one place, so waits are bounded, fair and abandoned
  // with their client; a transaction holds the place until it ends.
  const gate = new WaitGate({ slots: 1, busyTimeoutMs: opts.busyTimeoutMs });
  const waitAs = (w: WaitOptions): Queryable => ({
    query: (sql, params) => gate.run(w, () => direct.query(sql, params)),
    exec: (sql) => gate.run(w, () => direct.exec(sql)),
  });
  const base = waitAs({});

  /** Transactions from begin() not yet ended: while one is open, other statements queue behind it. */
  let open = 0;

  async function begin(opts: TxOptions = {}): Promise<Tx> {
    const place = await gate.acquire(opts, opts.preempt);
    try {
      return await beginHolding(opts, place);
    } catch (e) {
      place.release();
      throw e;
    }
  }

  async function beginHolding(opts: TxOptions, place: Place): Promise<Tx> {
    // PGlite's transaction() holds its mutex while the callback runs; we keep the
    // callback pending until commit/rollback so the transaction can span requests.
    let finish!: (commit: boolean) => void;
    const decided = new Promise<boolean>((r) => (finish = r));
    let ready!: (tx: PgTx) => void;
    let failed!: (e: unknown) => void;
    const started = new Promise<PgTx>((res, rej) => {
      ready = res;
      failed = rej;
    });
    const ROLLBACK = Symbol('rollback');
    const done = pg
      .transaction(async (tx) => {
        ready(tx as unknown as PgTx);
        if (!(await decided)) throw ROLLBACK;
      })
      .catch((e) => {
        if (e !== ROLLBACK) throw normalizeDbError(e);
      });
    done.catch((e) => failed(e));
    open++;
    void done
      .catch(() => {})
      .finally(() => {
        open--;
        place.release();
      });
    const tx = await started;
    const q = queryable(tx);
    let closed = false;
    try {
      if (opts.setup?.length) await q.exec(opts.setup.join('; '));
    } catch (e) {
      closed = true;
      finish(false);
      await done.catch(() => {});
      throw e;
    }
    return {
      ...q,
      get closed() {
        return closed;
      },
      idle: place.idle,
      async commit() {
        if (closed) return;
        closed = true;
        finish(true);
        await done;
      },
      async rollback() {
        if (closed) return;
        closed = true;
        finish(false);
        await done.catch(() => {});
      },
    };
  }

  return {
    kind: 'embedded',
    describe: `embedded PostgreSQL (PGlite) in ${dir}`,
    get busy() {
      return open > 0;
    },
    ...base,
    begin,
    waitAs,
    cancelWaits: (key, err) => gate.cancel(key, err),
    waits: gate.stats,
    transaction: (fn, opts) => runTransaction(begin, fn, opts),
    // PGlite serializes LISTEN/UNLISTEN on a lock of their own, apart from statements.
    listen: (channel, cb) =>
      run(async () => {
        const unlisten = await pg.listen(channel, cb);
        return async () => void (await unlisten());
      }),
    notify: (channel, payload) => base.query('SELECT pg_notify($1, $2)', [channel, payload]).then(() => {}),
    close: async () => {
      if (!pg.closed) await pg.close();
    },
  };
}
