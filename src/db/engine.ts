/**
 * The one small interface both storage engines implement. Nothing above `db/`
 * knows whether it talks to PGlite in-process or to a Postgres server.
 *
 * Value representation (identical on both engines, see docs/database.md):
 * int2/int4/float4/float8 → number, int8 and numeric → string (no precision loss),
 * bool → boolean, json/jsonb → parsed value, timestamp/timestamptz/date → Date,
 * bytea → Uint8Array, uuid/text → string, arrays → arrays of the above.
 */

export interface QueryResult<T = Record<string, unknown>> {
  rows: T[];
  /** Rows returned, or affected for INSERT/UPDATE/DELETE without RETURNING. */
  rowCount: number;
  /** Column names and Postgres type OIDs, in select-list order. */
  fields: { name: string; typeId: number }[];
}

export interface Queryable {
  /** One parameterized statement; `$1..$n` placeholders, values never spliced. */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<T>>;
  /** Several statements without parameters (migrations only). */
  exec(sql: string): Promise<void>;
}

/** A transaction holding its own connection until commit or rollback. */
export interface Tx extends Queryable {
  commit(): Promise<void>;
  rollback(): Promise<void>;
  readonly closed: boolean;
  /**
   * The holder is between statements again (nothing of it runs or is queued): work waiting
   * for the database may now ask it to yield (`TxOptions.preempt`).
   */
  idle?(): void;
}

/**
 * Who waits for the database (src/db/wait-gate.ts, docs/database.md "Waiting for the
 * database"). Without a key it is the platform's own work, served first.
 */
export interface WaitOptions {
  /** The API key the work is done for: its fair share, and what revoking it cancels. */
  key?: string;
  /** The request's signal: work whose client has gone never runs (src/db/wait-gate.ts: read at its turn, or listened to). */
  signal?: AbortSignal;
  /**
   * The most row data (bytes of the rows as PostgreSQL sends them) the statements may answer:
   * past it the rows are dropped as they arrive and the call fails with AnswerTooLargeError
   * once the exchange is over, so memory never follows a large answer. Applies on the wire
   * paths of both engines (`atOnce`, `waitAs`, a `begin` on the wire), not to the driver's
   * connections. The statements ran: outside a transaction a write is committed (the Database
   * API bounds writes in SQL instead), inside one the caller aborts it.
   */
  maxAnswerBytes?: number;
}

export interface TxOptions extends WaitOptions {
  /** Statements run right after BEGIN (e.g. SET LOCAL timeouts). */
  setup?: string[];
  /**
   * External PostgreSQL: hold a connection of the pool's wire path (src/db/external-wire.ts),
   * where that path is spoken, instead of the driver's; every statement's values must then be
   * strings, finite numbers or nulls (the Database API's). The embedded engine ignores it.
   */
  onWire?: boolean;
  /**
   * Asked to give the database back because other work waits for it (src/db/wait-gate.ts):
   * return true when the transaction, idle for at least `minIdleMs`, will end (roll back)
   * now; false to keep it (it is busy, or was idle for less).
   */
  preempt?: (minIdleMs: number) => boolean;
}

/** Counters of a wait gate since it opened (exported at /metrics). */
export interface WaitStats {
  /** Work that had to queue for a connection or the embedded session. */
  waited: number;
  /** Waits refused after database.busy_timeout_ms (503 database_busy). */
  refused: number;
  /** Waits whose client went away: they left the queue and never ran. */
  abandoned: number;
  /** Idle transactions asked to give the database back, and that did. */
  preempted: number;
}

/** A statement with its values, known before anything runs (`Db.atOnce`). */
export interface KnownStatement {
  sql: string;
  params: unknown[];
}

/**
 * The payload a polled subscription delivers (`Db.listen` behind a transaction-mode pooler
 * without database.direct_url): anything on the channel may have changed since the last one,
 * so a listener that keys on payloads (a cache) starts over.
 */
export const ANY_CHANGE = '';

/** External PostgreSQL: what its URL reaches (database.pooler) and where notifications come from. */
export interface Pooling {
  pooler: 'none' | 'transaction';
  /**
   * Where LISTEN goes: the pool's URL (`session`), database.direct_url (`direct`), or nowhere
   * (`polled`: ANY_CHANGE every `pollMs`).
   */
  notifications: 'session' | 'direct' | 'polled';
  pollMs: number;
  /** A pooler found in front of the URL at start (`detectPooler`), or undefined. */
  detected?: string;
}

/** The embedded engine's WAL, as the WAL archive reads it (src/modules/backup/wal-archive.ts). */
export interface EngineWal {
  /** Where the WAL is flushed to (an LSN): every byte before it is written to the segment files. */
  flushed(): bigint;
  /** The segments' folder. */
  readonly dir: string;
  /** Called, synchronously, before PostgreSQL removes or recycles a segment (`path`); must not throw. */
  beforeSegmentGone: ((path: string) => void) | undefined;
}

export interface Db extends Queryable {
  readonly kind: 'embedded' | 'external';
  /** Human description without credentials, for logs and errors. */
  readonly describe: string;
  /** External only: what the URL reaches and how notifications arrive. */
  readonly pooling?: Pooling;
  /**
   * Embedded only: a transaction opened with `begin()` holds the database right now, so
   * other statements wait for it (readiness must not mistake that for an outage).
   */
  readonly busy?: boolean;
  /** Embedded only: its WAL, for the WAL archive (src/modules/backup/wal-archive.ts). */
  readonly wal?: EngineWal;
  /**
   * Open a transaction that lives until `commit()`/`rollback()`. External: one
   * reserved pool connection. Embedded: holds the single in-process database, so
   * other work waits until it ends (documented trade-off of the embedded engine).
   */
  begin(opts?: TxOptions): Promise<Tx>;
  /** The same database for work done on behalf of `w` (an API key's share, a client that may leave). */
  waitAs(w: WaitOptions): Queryable;
  /** Refuse at once, with `err`, every wait of `key` (its key was revoked). */
  cancelWaits(key: string, err: unknown): void;
  readonly waits: WaitStats;
  /**
   * Run `statements`, all known up front, as one transaction of their own and return their
   * results in order; the first error is thrown, and nothing of them stays. They go out
   * together, when their values are plain (strings, numbers, nulls), as one batch ended by a
   * single Sync (an implicit transaction): on external PostgreSQL in one round trip on a
   * connection Basalt speaks the wire protocol on (src/db/external-wire.ts), on the embedded
   * engine in one exchange (src/db/embedded-wire.ts). Else (or where the external URL asks for
   * what that path does not speak): on external PostgreSQL BEGIN, the statements and COMMIT in
   * one round trip through the driver, on the embedded engine a transaction. For a statement
   * run as a user (src/modules/database/identity.ts).
   */
  atOnce(statements: readonly KnownStatement[], wait?: WaitOptions): Promise<QueryResult[]>;
  /** Run `fn` in a transaction; commit on success, roll back on throw. */
  transaction<R>(fn: (tx: Queryable) => Promise<R>, opts?: TxOptions): Promise<R>;
  /**
   * LISTEN on a channel; the callback gets NOTIFY payloads. Returns an unlisten function. Behind
   * a transaction-mode pooler without database.direct_url it is called with ANY_CHANGE every
   * `pooling.pollMs` instead.
   */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  notify(channel: string, payload: string): Promise<void>;
  close(): Promise<void>;
}

/** An answer whose rows passed `WaitOptions.maxAnswerBytes`: its rows were dropped as they came. */
export class AnswerTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`the answer's rows passed ${limit} bytes`);
    this.name = 'AnswerTooLargeError';
  }
}

/** The database cannot be reached (refused, dropped, shutting down). HTTP maps it to 503. */
export class DatabaseUnavailableError extends Error {
  constructor(
    message: string,
    readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'DatabaseUnavailableError';
  }
}

/**
 * No connection (or, embedded, the one session) became free within database.busy_timeout_ms.
 * HTTP maps it to 503 `database_busy` with `Retry-After` in every area's envelope.
 */
export class DatabaseBusyError extends DatabaseUnavailableError {
  constructor(readonly retryAfterSeconds: number) {
    super('the database is busy: no connection became free in time');
    this.name = 'DatabaseBusyError';
  }
}

/** The work's client went away while it waited for the database: it never ran. */
export class WaitAbandonedError extends DatabaseBusyError {
  constructor() {
    super(1);
    this.name = 'WaitAbandonedError';
    this.message = 'the client went away while the work waited for the database';
  }
}

/**
 * The disk holding the database is full (SQLSTATE 53100, e.g. `could not extend file`):
 * HTTP maps it to 503 `disk_full`, and `/readyz` reports it for a while
 * (docs/operations.md, "A full disk").
 */
export class DiskFullError extends DatabaseUnavailableError {
  /** When the last one was seen in this process (ms since the epoch), 0 for never. */
  static lastAt = 0;
  constructor(cause?: unknown) {
    super('the disk holding the database is full', cause);
    this.name = 'DiskFullError';
    DiskFullError.lastAt = Date.now();
  }
}

/** A Postgres error with its SQLSTATE and the fields needed to explain it safely. */
export class PgError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly detail: { column?: string; constraint?: string; table?: string; schema?: string; detail?: string } = {},
  ) {
    super(message);
    this.name = 'PgError';
  }
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/** Normalize a driver error into PgError / DatabaseUnavailableError; anything else is returned as is. */
export function normalizeDbError(err: unknown): unknown {
  if (err instanceof PgError || err instanceof DatabaseUnavailableError) return err;
  const e = err as {
    code?: string;
    message?: string;
    column?: string;
    column_name?: string;
    constraint?: string;
    constraint_name?: string;
    table?: string;
    table_name?: string;
    schema?: string;
    schema_name?: string;
    detail?: string;
  };
  const code = e?.code;
  if (code && CONNECTION_CODES.has(code)) return new DatabaseUnavailableError(`database unreachable (${code})`, err);
  // SQLSTATE class 08 = connection exception; 57P01..57P03 = server shutting down / cannot connect now.
  if (code && (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03')) {
    return new DatabaseUnavailableError(`database unavailable (${code})`, err);
  }
  if (code === '53100') return new DiskFullError(err);
  if (code && /^[0-9A-Z]{5}$/.test(code)) {
    return new PgError(e.message ?? 'database error', code, {
      column: e.column_name ?? e.column,
      constraint: e.constraint_name ?? e.constraint,
      table: e.table_name ?? e.table,
      schema: e.schema_name ?? e.schema,
      detail: e.detail,
    });
  }
  return err;
}

/** A driver call with its errors normalized (normalizeDbError); both engines wrap every call in it. */
export async function driverCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw normalizeDbError(err);
  }
}

/**
 * `Db.transaction` of both engines, over the engine's own `begin`: run `fn` in the
 * transaction, commit on success, roll back on throw and rethrow.
 */
export async function runTransaction<R>(
  begin: (opts?: TxOptions) => Promise<Tx>,
  fn: (tx: Queryable) => Promise<R>,
  opts?: TxOptions,
): Promise<R> {
  const tx = await begin(opts);
  try {
    const r = await fn(tx);
    await tx.commit();
    return r;
  } catch (e) {
    await tx.rollback();
    throw e;
  }
}

/**
 * Run `fn` under a savepoint of the open transaction `tx`: on a throw the transaction is
 * rolled back to it, so it stays usable (Postgres refuses everything after a failed
 * statement otherwise), and the error is thrown on. Nested calls are fine: a savepoint
 * name refers to the newest one.
 */
export async function underSavepoint<R>(tx: Queryable, fn: () => Promise<R>): Promise<R> {
  await tx.query('SAVEPOINT basalt_step');
  try {
    const r = await fn();
    await tx.query('RELEASE SAVEPOINT basalt_step');
    return r;
  } catch (e) {
    await tx.query('ROLLBACK TO SAVEPOINT basalt_step').catch(() => {}); // the step's own error is the one thrown
    throw e;
  }
}

/** Quote an identifier that was already checked against the catalog. */
export function quoteIdent(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"';
}
