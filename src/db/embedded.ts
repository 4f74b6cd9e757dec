import { PGlite, types, type Transaction } from '@electric-sql/pglite';
// Embedded as files so `bun build --compile` carries them; PGlite cannot find them under /$bunfs/ by itself.
import wasmPath from '@electric-sql/pglite/pglite.wasm' with { type: 'file' };
import initdbPath from '@electric-sql/pglite/initdb.wasm' with { type: 'file' };
import dataPath from '@electric-sql/pglite/pglite.data' with { type: 'file' };
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Db, EngineWal, KnownStatement, QueryResult, Queryable, Tx, TxOptions, WaitOptions } from './engine';
import { DatabaseUnavailableError, normalizeDbError } from './engine';
import { installEmbeddedGuard } from './embedded-guard';
import { checkPgliteInternals } from './pglite-internals';
import { DurableNodeFS } from './embedded-fs';
import { WalSyncs } from './group-commit';
import { batchable, type WireResult, WireStatements } from './embedded-wire';
import type { WireOptions } from './wire/options';
import { privateDataDir, syncTree } from './private-files';
import { undeclared } from '../util/undeclared';
import { gatedMembers, type GateOptions, type Place, WaitGate } from './wait-gate';

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

type PgTx = Transaction;

/**
 * When commits reach the disk (setting database.embedded_sync, docs/operations.md
 * "Durability"): `full` syncs the WAL before a commit is acknowledged, commits made at the
 * same time sharing one sync off the event loop (group commit, src/db/group-commit.ts);
 * `normal` lets commits return first and syncs the WAL within FLUSH_EVERY_MS; `off` never
 * syncs. `full` and `normal` sync data files and pg_control at checkpoints.
 */
export type EmbeddedSync = 'full' | 'normal' | 'off';

export interface EmbeddedOptions {
  sync?: EmbeddedSync;
  /**
   * PostgreSQL stopped inside the engine (a PANIC, e.g. the disk filled up under a WAL
   * write, or a FATAL): every later statement fails at once; the caller should exit.
   */
  onFatal?: (err: DatabaseUnavailableError) => void;
  /**
   * Open as a point-in-time restore (src/modules/backup/pitr.ts): PostgreSQL's recovery
   * settings, added to its start parameters, and the `restore_command` it runs (`system()`).
   * Its log lines (recovery's progress and stop point) go to `log`.
   */
  recovery?: { params: string[]; system: (command: string) => number; log: (line: string) => void };
}

/**
 * A collection is asked for (Bun.gc(false): started, not waited for) every this many statements.
 * The collector counts the engine's WebAssembly memory against the heap's budget, so on its own it
 * lets a statement load's garbage grow by hundreds of MiB before collecting, and the pages it then
 * returns are faulted back in (bench:embedded-load: +150 MiB in 15 s without; +10 MiB with, and
 * less CPU per statement; docs/bench/2026-11-25-embedded-engine-under-load.md).
 */
const COLLECT_EVERY = 1000;
/**
 * And a full collection (Bun.gc(true), waited for: 15–30 ms) every this many statements. What is in
 * flight when a quick collection runs (each statement's promises and async frames, some 160 bytes a
 * statement) outlives it and is then freed only by a full collection, which the collector, counting
 * the WebAssembly memory, puts off: at 24,000 statements a second RSS grew by 3.3 MiB a second,
 * +209 MiB in 60 s; with this, +13 to +30 MiB (docs/bench/2026-11-26-1543-two-runs-median-to-0.012.md).
 */
const FULL_COLLECT_EVERY = 100_000;
/** The engine's buffer cache (docs/operations.md, "Memory"). */
const SHARED_BUFFERS = '16MB';

/** `normal`: how often the WAL written by commits that returned is synced. */
const FLUSH_EVERY_MS = 200;

/**
 * PostgreSQL's start parameters: PGlite's own, except that `full` and `normal` drop its
 * `-F` (fsync off) and send WAL flushes through `fsync` (Emscripten's `fdatasync` does
 * nothing); the memory settings keep the engine's resident size small (docs/operations.md,
 * "Memory").
 */
/**
 * The engine's WebAssembly module, which PGlite keeps `protected`: the abort hook (a
 * PANIC) and the WAL functions this file calls (src/util/undeclared.ts).
 */
interface EngineModule {
  onAbort?: (what: unknown) => void;
  _XLogFlush(lsn: bigint): void;
  _GetFlushRecPtr(): bigint;
}
function engineModule(pg: PGlite): EngineModule {
  return undeclared<{ mod: EngineModule }>(pg).mod;
}

function startParams(sync: EmbeddedSync): string[] {
  const base = PGlite.defaultStartParams;
  const params = sync === 'off' ? [...base] : base.filter((p) => p !== '-F');
  if (sync !== 'off') params.push('-c', 'wal_sync_method=fsync');
  if (sync === 'normal') params.push('-c', 'synchronous_commit=off');
  // PGlite's default 128 MB of shared buffers become resident as they fill and stay so (the
  // WebAssembly memory never shrinks); the OS page cache holds the files anyway.
  params.push('-c', `shared_buffers=${SHARED_BUFFERS}`);
  return params;
}

let compiled: Promise<WebAssembly.Module> | undefined;

/**
 * The engine's WebAssembly, compiled once per process. A process taking another over
 * (src/cli/serve-command.ts) starts this before the old one lets go of the data dir, so the
 * compilation is not part of the time requests wait.
 */
export function compileEngine(): Promise<WebAssembly.Module> {
  return (compiled ??= Bun.file(wasmPath)
    .arrayBuffer()
    .then((b) => WebAssembly.compile(b)));
}

/** `busyTimeoutMs`: how long work waits for the one session (src/db/wait-gate.ts); no bound when omitted. */
export async function openEmbedded(
  dir: string,
  opts: EmbeddedOptions & Pick<GateOptions, 'busyTimeoutMs'> = {},
): Promise<Db> {
  const sync = opts.sync ?? 'full';
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const firstRun = !existsSync(join(dir, 'PG_VERSION'));
  // initdb's module is needed only to create the cluster; compiled, it is tens of MiB.
  const [pgliteWasmModule, initdbWasmModule] = await Promise.all([
    compileEngine(),
    firstRun ? WebAssembly.compile(await Bun.file(initdbPath).arrayBuffer()) : undefined,
  ]);
  // `full`: group commit. A sync that fails stops the engine (below), as a PANIC does.
  let walFailed: (e: Error) => void = () => {};
  const wal = sync === 'full' ? new WalSyncs((e) => walFailed(e)) : undefined;
  // Set by the WAL archive once it runs (EngineWal.beforeSegmentGone).
  let segmentGone: ((path: string) => void) | undefined;
  const fs = new DurableNodeFS(dir, wal, {
    beforeSegmentGone: (path) => segmentGone?.(path),
    system: opts.recovery?.system,
  });
  const recovery = opts.recovery;
  const pg = await PGlite.create({
    fs,
    pgliteWasmModule,
    ...(initdbWasmModule ? { initdbWasmModule } : {}),
    fsBundle: Bun.file(dataPath),
    parsers,
    startParams: [...startParams(sync), ...(recovery?.params ?? [])],
    ...(recovery
      ? {
          onStderr: (line: string) => {
            recovery.log(line);
            return false;
          },
        }
      : {}),
  });
  // What of PGlite Basalt uses beyond its promises is there, or start-up fails naming it.
  try {
    checkPgliteInternals(pg);
  } catch (e) {
    await pg.close().catch(() => {}); // the check's failure is the one thrown
    throw e;
  }
  // initdb wrote the new cluster without syncing it, and a checkpoint syncs only what this
  // process wrote: sync it all once, so the cluster the first commits build on is on disk.
  if (firstRun) {
    // initdb runs in its own module, outside the layer that keeps modes private.
    privateDataDir(dir);
    if (sync !== 'off') syncTree(dir);
  }

  // A PANIC inside PostgreSQL aborts the WebAssembly; PGlite reports the error, but the
  // next statement would spin inside the aborted module forever. So from the abort on,
  // nothing enters it again, and the owner hears of it once (it exits; recovery at the
  // next start replays the WAL).
  let fatal: DatabaseUnavailableError | undefined;
  let aborted = false;
  const die = (reason: string, cause?: unknown) => {
    if (fatal) return;
    fatal = new DatabaseUnavailableError(`the embedded database stopped: ${reason}`, cause);
    opts.onFatal?.(fatal);
  };
  walFailed = (e) => {
    aborted = true;
    die(e.message, e);
  };
  if (wal?.failed) walFailed(wal.failed);
  const mod = engineModule(pg);
  mod.onAbort = () => {
    aborted = true;
    // The PANIC's own message normally arrives first, through the failing statement.
    setTimeout(() => die('PostgreSQL aborted'), 0);
  };
  const rawSync = pg.execProtocolRawSync.bind(pg);
  pg.execProtocolRawSync = (message: Uint8Array) => {
    if (aborted) throw fatal ?? new DatabaseUnavailableError('the embedded database stopped: PostgreSQL aborted');
    return rawSync(message);
  };
  /** A driver error as the engine's error; a PANIC or FATAL also stops the engine (above). */
  const failure = (e: unknown): unknown => {
    const severity = (e as { severity?: string }).severity;
    if (aborted || severity === 'PANIC' || severity === 'FATAL') {
      die(`${severity ?? 'PANIC'}: ${(e as Error).message}`, e);
      return fatal;
    }
    return normalizeDbError(e);
  };
  let statements = 0;
  const run = async <T>(fn: () => Promise<T>): Promise<T> => {
    if (fatal) throw fatal;
    statements++;
    if (statements % COLLECT_EVERY === 0) Bun.gc(statements % FULL_COLLECT_EVERY === 0);
    try {
      return await fn();
    } catch (e) {
      throw failure(e);
    }
  };
  // Parameterized statements go through reused buffers (src/db/embedded-wire.ts); exec (several
  // statements, simple protocol) through PGlite. NOTIFYs reach listeners from either path.
  const listeners = new Map<string, Set<(payload: string) => void>>();
  const wire = new WireStatements(pg, (channel, payload) => {
    for (const cb of listeners.get(channel) ?? []) cb(payload);
  });
  /**
   * `tx`: the PGlite transaction the statements run in, or none (autocommit). A statement on its
   * own whose values are `batchable` (strings, finite numbers, nulls: what the Database API and
   * most of the platform send) runs as a batch of one: prepared in the session by its text and
   * run in one exchange, as `atOnce` runs a user's statements, instead of parsed and planned
   * anew after a describe exchange. Its values then go as text for the server to read, as
   * postgres.js sends them on external PostgreSQL.
   */
  const queryable = (target: { exec: PGlite['exec'] }, tx?: PgTx, maxAnswerBytes?: number): Queryable => {
    const opts: WireOptions = { inTransaction: tx !== undefined, maxAnswerBytes };
    return {
      query: <T>(sql: string, params: unknown[] = []) =>
        run(async () => {
          if (tx?.closed) throw new Error('Transaction is closed');
          if (!tx && batchable(params)) return wrap<T>((await wire.batch([{ sql, params }], opts))[0] as WireResult<T>);
          return wrap<T>(await wire.query<T>(sql, params, opts));
        }),
      exec: (sql: string) => run(async () => void (await target.exec(sql))),
    };
  };
  // initdb's WebAssembly heap (hundreds of MiB) is garbage once the cluster exists, but
  // the collector may keep it for the life of the process; it stays reachable for a
  // moment after create() returns, so collect it shortly after (measured: ~700 → ~300 MiB).
  if (firstRun) setTimeout(() => Bun.gc(true), 1500).unref();
  // A JS stack overflow inside the WebAssembly must end as a PostgreSQL error, never as
  // a session left with dangling error state (src/db/embedded-guard.ts).
  try {
    installEmbeddedGuard(pg);
  } catch (e) {
    await pg.close().catch(() => {}); // the guard's failure is the one thrown
    throw e;
  }
  const direct = queryable(pg);
  // One session: work takes the gate's one place, so waits are bounded, fair and abandoned
  // with their client; a transaction holds the place until it ends.
  const gate = new WaitGate({ slots: 1, busyTimeoutMs: opts.busyTimeoutMs });
  /**
   * The one way work outside a transaction reaches the session: `fn` holding the gate's place,
   * answered once the WAL it wrote is on disk. With group commit (`full`) a commit returns from
   * the engine with its WAL written to the OS, not synced (src/db/group-commit.ts); the wait for
   * the sync is here, after the place is given back, so the commits made meanwhile share the
   * next sync. Work that asked for no WAL flush (a read) is answered at once.
   */
  const onSession = <T>(w: WaitOptions, fn: () => Promise<T>): Promise<T> => {
    if (!wal) return gate.run(w, fn);
    let from = 0;
    let to = 0;
    return gate
      .run(w, async () => {
        from = wal.mark;
        try {
          return await fn();
        } finally {
          to = wal.mark;
        }
      })
      .then(
        (r) => (to === from ? r : synced(wal, to).then(() => r)),
        (e: unknown) => (to === from ? Promise.reject(e) : synced(wal, to).then(() => Promise.reject(e))),
      );
  };
  /** `WalSyncs.durable`: refused as the engine's stop (503) when a sync failed. */
  const synced = (w: WalSyncs, to: number): Promise<void> =>
    w.durable(to).catch((e: Error) => {
      throw fatal ?? new DatabaseUnavailableError(`the embedded database stopped: ${e.message}`, e);
    });
  /** A transaction's commit: answered, like `onSession`, once the WAL it wrote is on disk. */
  const committed = async (commit: Promise<void>, from: number): Promise<void> => {
    try {
      await commit;
    } finally {
      if (wal && wal.mark !== from) await synced(wal, wal.mark);
    }
  };
  /** Statements bounded by their answer's size (WaitOptions.maxAnswerBytes), by the bound: few values. */
  const boundedBy = new Map<number, Queryable>();
  const waitAs = (w: WaitOptions): Queryable => {
    let q = direct;
    if (w.maxAnswerBytes) {
      q = boundedBy.get(w.maxAnswerBytes) ?? queryable(pg, undefined, w.maxAnswerBytes);
      if (boundedBy.size < 16) boundedBy.set(w.maxAnswerBytes, q);
    }
    return {
      query: (sql, params) => onSession(w, () => q.query(sql, params)),
      exec: (sql) => onSession(w, () => q.exec(sql)),
    };
  };
  const base = waitAs({});
  const flusher =
    sync === 'normal'
      ? startWalFlusher(
          pg,
          () => statements,
          () => fatal !== undefined,
        )
      : undefined;

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
        ready(tx);
        if (!(await decided)) throw ROLLBACK;
      })
      .catch((e) => {
        if (e !== ROLLBACK) throw failure(e);
      });
    done.catch((e) => failed(e));
    open++;
    void done
      .catch(() => {}) // `done`'s failure reaches the caller through `failed`
      .finally(() => {
        open--;
        place.release();
      });
    const tx = await started;
    const q = queryable(tx, tx, opts.maxAnswerBytes);
    let closed = false;
    try {
      if (opts.setup?.length) await q.exec(opts.setup.join('; '));
    } catch (e) {
      closed = true;
      finish(false);
      await done.catch(() => {}); // the setup's failure is the one thrown
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
        const from = wal?.mark ?? 0;
        finish(true);
        await committed(done, from);
      },
      async rollback() {
        if (closed) return;
        closed = true;
        finish(false);
        await done.catch(() => {}); // a rollback: nothing of the transaction is kept either way
      },
    };
  }

  const members = gatedMembers(gate, begin, waitAs);
  /** Statements known up front: one exchange with PGlite (a single Sync), or a transaction when a value is not plain. */
  const atOnce = (statements: readonly KnownStatement[], w: WaitOptions = {}): Promise<QueryResult[]> => {
    if (!statements.every((st) => batchable(st.params)))
      return members.transaction(async (tx) => {
        const out: QueryResult[] = [];
        for (const st of statements) out.push(await tx.query(st.sql, st.params));
        return out;
      }, w);
    return onSession(w, () => run(async () => (await wire.batch(statements, w)).map((r) => wrap(r))));
  };

  const engineWal: EngineWal = {
    // Between statements nothing else runs inside the engine: read in line, as the flusher does.
    flushed: () => (fatal || pg.closed ? 0n : mod._GetFlushRecPtr()),
    dir: join(dir, 'pg_wal'),
    get beforeSegmentGone() {
      return segmentGone;
    },
    set beforeSegmentGone(fn: ((path: string) => void) | undefined) {
      segmentGone = fn;
    },
  };
  return {
    kind: 'embedded',
    describe: `embedded PostgreSQL (PGlite) in ${dir}`,
    wal: engineWal,
    get busy() {
      return open > 0;
    },
    ...base,
    ...members,
    atOnce,
    // LISTEN is a statement on the one session: it takes the gate's place like any other, so a
    // first subscription while a transaction holds the session (the first API key checked by a
    // process, say) waits within database.busy_timeout_ms instead of without bound.
    listen: (channel, cb) =>
      onSession({}, () =>
        run(async () => {
          // As PGlite names channels: a quoted name as written, any other in lower case.
          const name = /^".*"$/.test(channel) ? channel.slice(1, -1) : channel.toLowerCase();
          const unlisten = await pg.listen(channel, cb);
          let set = listeners.get(name);
          if (!set) listeners.set(name, (set = new Set()));
          set.add(cb);
          return async () => {
            set.delete(cb);
            if (set.size === 0) listeners.delete(name);
            await unlisten();
          };
        }),
      ),
    notify: (channel, payload) => base.query('SELECT pg_notify($1, $2)', [channel, payload]).then(() => {}),
    close: async () => {
      if (flusher) clearInterval(flusher);
      if (pg.closed) return;
      // An aborted engine cannot run its shutdown checkpoint; the next start recovers from the WAL.
      if (aborted)
        await pg.close().catch(() => {}); // the engine already stopped; closing is best effort
      else await pg.close();
      // The shutdown checkpoint synced the WAL before pg_control; this lets go of the descriptors.
      if (!aborted) wal?.close();
    },
  };
}

/**
 * `normal`: commits return before their WAL is synced (synchronous_commit=off); with no
 * WAL writer process in the embedded engine, this flushes it every FLUSH_EVERY_MS, one
 * fsync for all the commits since the last flush, between statements.
 */
function startWalFlusher(pg: PGlite, statements: () => number, stopped: () => boolean): ReturnType<typeof setInterval> {
  const mod = engineModule(pg);
  let running = false;
  let seen = -1;
  const timer = setInterval(async () => {
    // Nothing ran since the last flush: nothing to sync (the flush's own statement writes no WAL).
    if (running || stopped() || pg.closed || statements() === seen) return;
    running = true;
    seen = statements();
    try {
      const r = await pg.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      const [hi, lo] = r.rows[0]!.lsn.split('/').map((h) => BigInt(`0x${h}`));
      const lsn = (hi! << 32n) | lo!;
      // Synchronously, right after the statement: nothing else runs inside the engine now.
      if (!stopped() && lsn > mod._GetFlushRecPtr()) mod._XLogFlush(lsn);
    } catch {
      // A failing flush is a PANIC in PostgreSQL (data_sync_retry = off): the next statement reports it.
    } finally {
      running = false;
    }
  }, FLUSH_EVERY_MS);
  timer.unref();
  return timer;
}
