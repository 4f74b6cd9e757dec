/**
 * Parameterized statements on the embedded engine, spoken to PGlite's PostgreSQL in the wire
 * protocol with buffers that are reused, instead of through `PGlite.query`.
 *
 * Why: `PGlite.query` runs a statement as six protocol exchanges (parse, describe, bind,
 * describe, execute, sync), and its protocol code copies as it goes: every message it writes
 * is a new ArrayBuffer, every chunk it reads is copied out of the WebAssembly memory, and every
 * string it reads (each field of each row) is decoded from an ArrayBuffer sliced for it. A
 * 10-row select left about 60 ArrayBuffers behind; the collector, which counts PGlite's
 * WebAssembly memory against the heap's budget, let them pile up until the process had grown by
 * hundreds of MiB, and CPU per statement alternated between two levels as it collected
 * (docs/bench/2026-11-25-embedded-engine-under-load.md).
 *
 * Here a statement is two exchanges, each written into one growing buffer and read from another:
 *  1. Parse + Describe (statement) + Flush: the parameters' types, so each value is serialized
 *     by PGlite's own serializer for its type, as `PGlite.query` does (skipped when every value
 *     is `batchable`: they go as text for the server to read, as in a batch);
 *  2. Bind + Describe (portal) + Execute + Sync: the rows, decoded straight from the read buffer
 *     with PGlite's parsers for their types (the instance's, with the adapter's own).
 * A batch (`batch`: statements known up front, run as one transaction of their own) is one
 * exchange: Parse + Bind + Describe (portal) + Execute for each statement, then a single Sync.
 * PostgreSQL runs what comes between two Syncs as one implicit transaction: committed at the
 * Sync, or rolled back there when a statement fails (the ones after it are skipped), so a
 * `set_config(…, true)` of the batch lasts until its end and no longer. Its values go as text
 * typed by the server, without asking for the types first: only strings, finite numbers and
 * nulls, which each type's serializer would send as the same text (`batchable`). A batch's
 * statements stay prepared in the session by their text (at most PREPARED_MAX, the least
 * recently used closed beyond), so a statement seen before is only bound and run: parsing and
 * planning one under row-level security costs more than running it. PostgreSQL plans it again
 * when the schema or the role changes; a prepared statement gone or outdated (26000, 0A000)
 * makes the batch, rolled back as a whole, run once more with statements parsed anew. A
 * statement on its own outside a transaction, with batchable values, is a batch of one
 * (src/db/embedded.ts); inside a transaction (where a stale statement could not be run again:
 * the error aborts it) it stays unnamed, in one exchange when its values are batchable.
 * What comes back is what `PGlite.query` returns for the same statement: rows as objects (a
 * later column of the same name wins), fields, and the rows an INSERT, UPDATE, DELETE, MERGE or
 * COPY touched. An ErrorResponse becomes an error with PostgreSQL's fields (code, severity,
 * detail, constraint, …). NOTIFY messages that arrive with a statement's answer are handed to
 * `onNotification`. PGlite's own locks are taken as `PGlite.query` takes them, so its other users
 * (exec, transactions, LISTEN) interleave with these statements as they do with its own.
 */
import { isAscii } from 'node:buffer';
import type { PGlite } from '@electric-sql/pglite';
import { AnswerTooLargeError } from './engine';
import { undeclared } from '../util/undeclared';
import { PostgresError, readErrorResponse } from './wire/errors';
import { NO_OPTIONS, type WireOptions } from './wire/options';
import { PreparedStatements } from './wire/prepared';
import { BIND, DESCRIBE, EXECUTE, FLUSH, LARGE, PARSE, SYNC, Writer } from './wire-writer';

type Parser = (value: string, typeId: number) => unknown;
type Serializer = (value: unknown) => string;

/** The parts of a PGlite instance this path uses (public methods, and the locks its own query takes). */
interface PgliteInternals {
  readonly closed: boolean;
  parsers: Record<number, Parser>;
  serializers: Record<number, Serializer>;
  execProtocolRawStream(
    message: Uint8Array,
    opts: { syncToFs?: boolean; onRawData: (chunk: Uint8Array) => void },
  ): Promise<void>;
  syncToFs(): Promise<void>;
  _runExclusiveQuery<T>(fn: () => Promise<T>): Promise<T>;
  _runExclusiveTransaction<T>(fn: () => Promise<T>): Promise<T>;
}

/** A field longer than this is checked for ASCII natively (`isAscii`) rather than byte by byte. */
const LONG_FIELD = 64;

/** A statement of a batch: its values are `batchable`. */
export interface BatchStatement {
  sql: string;
  params: readonly unknown[];
}

/**
 * Whether `params` can go in a batch: strings, finite numbers and nulls, sent as text for the
 * server to read as the type it infers (what each type's serializer makes of them too).
 */
export function batchable(params: readonly unknown[]): boolean {
  for (const p of params) {
    if (p === null || p === undefined || typeof p === 'string') continue;
    if (typeof p === 'number' && Number.isFinite(p)) continue;
    return false;
  }
  return true;
}

export interface WireResult<T> {
  rows: T[];
  fields: { name: string; dataTypeID: number }[];
  affectedRows: number;
}

interface Reply {
  error?: PostgresError;
  paramTypes: number[];
  names: string[];
  types: number[];
  rows: Record<string, unknown>[];
  affectedRows: number;
}

export class WireStatements {
  private readonly pg: PgliteInternals;
  private readonly w = new Writer();
  private input = Buffer.allocUnsafe(64 * 1024);
  private inputLength = 0;
  /** The values of the statement being bound, serialized (reused). */
  private readonly values: unknown[] = [];
  private readonly exchange: { syncToFs: boolean; onRawData: (chunk: Uint8Array) => void };
  /** Batch statements prepared in the session, by text. */
  private readonly prepared = new PreparedStatements<{ readonly name: string }>(this.w, 'basalt_batch_');
  /** The exchange's bound on its answer (`WaitOptions.maxAnswerBytes`); 0: none. */
  private limit = 0;
  /** Whether the exchange's rows passed `limit` (they were dropped: `dropRows`). */
  private over = false;

  constructor(
    pg: PGlite,
    private readonly onNotification: (channel: string, payload: string) => void,
  ) {
    this.pg = undeclared<PgliteInternals>(pg);
    // One options object (and one callback) for every exchange.
    this.exchange = {
      syncToFs: false,
      onRawData: (chunk) => {
        const need = this.inputLength + chunk.length;
        if (need > this.input.length) {
          const next = Buffer.allocUnsafe(Math.max(this.input.length * 2, need));
          this.input.copy(next, 0, 0, this.inputLength);
          this.input = next;
        }
        this.input.set(chunk, this.inputLength);
        this.inputLength = need;
        if (this.limit > 0 && this.inputLength > this.limit) this.dropRows();
      },
    };
  }

  /**
   * The answer so far passed the exchange's bound: every DataRow received whole is dropped
   * (the other messages, which end statements and the exchange, are kept), so the buffer
   * never holds more than about the bound and a chunk; the exchange then fails (`send`).
   */
  private dropRows(): void {
    const b = this.input;
    let read = 0;
    let write = 0;
    while (read + 5 <= this.inputLength) {
      const next = read + 1 + b.readInt32BE(read + 1);
      if (next > this.inputLength) break;
      if (b[read] === 0x44) this.over = true;
      else {
        if (write !== read) b.copy(b, write, read, next);
        write += next - read;
      }
      read = next;
    }
    if (read < this.inputLength) b.copy(b, write, read, this.inputLength);
    this.inputLength = write + (this.inputLength - read);
  }

  /**
   * Run `sql` with `params` as `PGlite.query` would. `inTransaction`: the statement runs inside a
   * transaction PGlite holds (its transaction lock is taken already; nothing is synced after it).
   */
  query<T>(sql: string, params: readonly unknown[], opts: WireOptions = NO_OPTIONS): Promise<WireResult<T>> {
    if (this.pg.closed) return Promise.reject(new Error('PGlite is closed'));
    const inTransaction = opts.inTransaction === true;
    const maxAnswerBytes = opts.maxAnswerBytes ?? 0;
    const run = () => this.pg._runExclusiveQuery(() => this.run<T>(sql, params, inTransaction, maxAnswerBytes));
    return inTransaction ? run() : this.pg._runExclusiveTransaction(run);
  }

  /**
   * Run `statements` (each `batchable`) as one transaction of their own, in one exchange
   * ended by a single Sync; their results in order. The first error is thrown: the statements
   * after it did not run, and nothing of the batch stays (PostgreSQL rolled it back at the Sync).
   */
  batch(
    statements: readonly BatchStatement[],
    opts: { maxAnswerBytes?: number } = NO_OPTIONS,
  ): Promise<WireResult<Record<string, unknown>>[]> {
    if (this.pg.closed) return Promise.reject(new Error('PGlite is closed'));
    const maxAnswerBytes = opts.maxAnswerBytes ?? 0;
    // A statement gone stale (undefined): all were let go of, and the batch, rolled back as a
    // whole, runs once more parsed anew.
    return this.pg._runExclusiveTransaction(() =>
      this.pg._runExclusiveQuery(
        async () =>
          (await this.runBatch(statements, maxAnswerBytes, true)) ??
          (await this.runBatch(statements, maxAnswerBytes, false))!,
      ),
    );
  }

  /** One exchange of `statements`; undefined when a statement was stale and `mayRerun` (PreparedStatements.failed). */
  private async runBatch(
    statements: readonly BatchStatement[],
    maxAnswerBytes: number,
    mayRerun: boolean,
  ): Promise<WireResult<Record<string, unknown>>[] | undefined> {
    // Before anything is written: the statements to close stay queued, the prepared ones as they were.
    Writer.checkBindCounts(statements);
    const w = this.w.reset();
    const prepared = this.prepared;
    prepared.begin();
    for (const st of statements) {
      let p = prepared.get(st.sql);
      if (p === undefined) {
        p = { name: prepared.name() };
        w.begin(PARSE).cstring(p.name).cstring(st.sql).int16(0).end();
        prepared.add(st.sql, p);
      }
      w.begin(BIND).cstring('').cstring(p.name).int16(0).count16(st.params.length);
      for (const v of st.params) {
        if (v === null || v === undefined) w.int32(-1);
        else w.text(typeof v === 'string' ? v : String(v));
      }
      w.int16(0).end(); // result columns: all text
      w.begin(DESCRIBE).int16(0x5000).end(); // 'P', the unnamed portal
      w.begin(EXECUTE).cstring('').int32(0).end();
    }
    w.bare(SYNC);
    const replies: Reply[] = [];
    await this.send(replies, maxAnswerBytes);
    const failed = replies.find((r) => r.error)?.error;
    if (failed) {
      if (prepared.failed(failed.code, mayRerun)) return undefined;
      throw failed;
    }
    if (replies.length < statements.length) throw new Error('the batch ended before all its statements answered');
    await this.pg.syncToFs();
    if (this.over) throw new AnswerTooLargeError(maxAnswerBytes);
    return statements.map((_, i) => {
      const r = replies[i]!;
      return {
        rows: r.rows,
        fields: r.names.map((name, j) => ({ name, dataTypeID: r.types[j]! })),
        affectedRows: r.affectedRows,
      };
    });
  }

  private async run<T>(
    sql: string,
    params: readonly unknown[],
    inTransaction: boolean,
    maxAnswerBytes: number,
  ): Promise<WireResult<T>> {
    Writer.checkBindCounts([{ params }]);
    const w = this.w.reset();
    w.begin(PARSE).cstring('').cstring(sql).int16(0).end();
    let paramTypes: number[] = [];
    // Values a batch could take go as text, as in a batch: no serializer would write them otherwise.
    const describe = !batchable(params);
    if (describe) {
      // The types first: each value is serialized for its parameter's type.
      w.begin(DESCRIBE).int16(0x5300).end().bare(FLUSH); // 'S' then the empty name's NUL
      const described = await this.send();
      if (described.error) {
        await this.sync();
        throw described.error;
      }
      paramTypes = described.paramTypes;
      w.reset();
    }
    try {
      this.bind(params, paramTypes);
    } catch (e) {
      // A value its type's serializer refuses: end the exchange begun above.
      if (describe) await this.sync();
      throw e;
    }
    w.begin(DESCRIBE).int16(0x5000).end(); // 'P', the unnamed portal
    w.begin(EXECUTE).cstring('').int32(0).end().bare(SYNC);
    const reply = await this.send(undefined, maxAnswerBytes);
    if (reply.error) throw reply.error;
    if (!inTransaction) await this.pg.syncToFs();
    if (this.over) throw new AnswerTooLargeError(maxAnswerBytes);
    const fields = reply.names.map((name, i) => ({ name, dataTypeID: reply.types[i]! }));
    return { rows: reply.rows as T[], fields, affectedRows: reply.affectedRows };
  }

  /** Bind of the unnamed statement to the unnamed portal, values serialized as PGlite.query does. */
  private bind(params: readonly unknown[], types: number[]): void {
    const w = this.w;
    const serializers = this.pg.serializers;
    const values = this.values;
    values.length = params.length;
    for (let i = 0; i < params.length; i++) {
      const p = params[i];
      if (p === null || p === undefined) values[i] = null;
      else {
        const serialize = serializers[types[i]!];
        values[i] = serialize ? serialize(p) : (p as { toString(): string }).toString();
      }
    }
    // The format of each value as serialized: bytes go as binary, everything else as text.
    w.begin(BIND).cstring('').cstring('').count16(values.length);
    for (const v of values) w.int16(v instanceof ArrayBuffer || ArrayBuffer.isView(v) ? 1 : 0);
    w.count16(values.length);
    for (const v of values) {
      if (v === null) w.int32(-1);
      else if (typeof v === 'string') w.text(v);
      else if (v instanceof ArrayBuffer) w.bytes(new Uint8Array(v));
      else if (ArrayBuffer.isView(v)) w.bytes(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
      else w.text(String(v));
    }
    values.length = 0;
    w.int16(0).end(); // result columns: all text
  }

  private async sync(): Promise<void> {
    this.w.reset().bare(SYNC);
    await this.send();
  }

  /**
   * One exchange: what the writer holds goes in, the answer is read from the reused buffer.
   * With `each`, every statement's answer (ended by its CommandComplete) is pushed there apart,
   * the one a failure cut short last; the first answer is returned.
   */
  private async send(each?: Reply[], maxAnswerBytes = 0): Promise<Reply> {
    this.inputLength = 0;
    this.limit = maxAnswerBytes;
    this.over = false;
    try {
      await this.pg.execProtocolRawStream(this.w.view(), this.exchange);
    } finally {
      this.limit = 0;
    }
    const reply = this.read(each);
    // A large statement or answer (an export, a bulk insert) does not keep its buffer for the process's life.
    if (this.input.length > LARGE) this.input = Buffer.allocUnsafe(64 * 1024);
    if (this.w.buf.length > LARGE) this.w.buf = Buffer.allocUnsafe(16 * 1024);
    return reply;
  }

  private read(each?: Reply[]): Reply {
    const b = this.input;
    const end = this.inputLength;
    const first: Reply = { paramTypes: [], names: [], types: [], rows: [], affectedRows: 0 };
    let reply = first;
    let parsers: (Parser | undefined)[] = [];
    /** The answer from the first DataRow on, as latin1 (decoded when first needed), and where it starts in `b`. */
    let latin1: string | undefined;
    let base = 0;
    let at = 0;
    while (at + 5 <= end) {
      const code = b[at]!;
      const next = at + 1 + b.readInt32BE(at + 1);
      let p = at + 5;
      switch (code) {
        case 0x44: {
          // DataRow
          const n = b.readInt16BE(p);
          p += 2;
          const row: Record<string, unknown> = {};
          for (let i = 0; i < n; i++) {
            const len = b.readInt32BE(p);
            p += 4;
            if (len < 0) {
              row[reply.names[i]!] = null;
              continue;
            }
            const e = p + len;
            // An ASCII field is the same characters in latin1 as in UTF-8: a substring of the
            // answer decoded once (cheap in JavaScriptCore) instead of a decode of its own.
            let ascii: boolean;
            if (len > LONG_FIELD) ascii = isAscii(b.subarray(p, e));
            else {
              let q = p;
              while (q < e && b[q]! < 0x80) q++;
              ascii = q === e;
            }
            let text: string;
            if (ascii) {
              if (latin1 === undefined) {
                latin1 = b.toString('latin1', at, end);
                base = at;
              }
              text = latin1.slice(p - base, e - base);
            } else text = b.toString('utf8', p, e);
            p = e;
            const parse = parsers[i];
            row[reply.names[i]!] = parse ? parse(text, reply.types[i]!) : text;
          }
          reply.rows.push(row);
          break;
        }
        case 0x54: {
          // RowDescription
          const n = b.readInt16BE(p);
          p += 2;
          reply.names = new Array(n);
          reply.types = new Array(n);
          parsers = new Array(n);
          for (let i = 0; i < n; i++) {
            const z = b.indexOf(0, p);
            reply.names[i] = b.toString('utf8', p, z);
            p = z + 1 + 4 + 2; // table oid, column number
            const type = b.readInt32BE(p);
            reply.types[i] = type;
            parsers[i] = this.pg.parsers[type];
            p += 4 + 2 + 4 + 2; // type, size, modifier, format
          }
          break;
        }
        case 0x74: {
          // ParameterDescription (a count of up to 65,535: unsigned)
          const n = b.readUInt16BE(p);
          p += 2;
          for (let i = 0; i < n; i++) reply.paramTypes.push(b.readInt32BE(p + 4 * i));
          break;
        }
        case 0x43: {
          // CommandComplete: "INSERT 0 5", "UPDATE 3", "SELECT 10", …: read only when it may count
          // touched rows (its first letter that of INSERT, UPDATE, DELETE, COPY or MERGE; not a select's).
          const initial = b[p]!;
          if (initial === 0x49 || initial === 0x55 || initial === 0x44 || initial === 0x43 || initial === 0x4d) {
            const tag = b.toString('utf8', p, b.indexOf(0, p));
            const space = tag.indexOf(' ');
            const command = space < 0 ? tag : tag.slice(0, space);
            if (
              command === 'INSERT' ||
              command === 'UPDATE' ||
              command === 'DELETE' ||
              command === 'COPY' ||
              command === 'MERGE'
            ) {
              const n = Number.parseInt(tag.slice(tag.lastIndexOf(' ') + 1), 10);
              if (!Number.isNaN(n)) reply.affectedRows += n;
            }
          }
          if (each) {
            // A batch: the next statement's answer starts here.
            each.push(reply);
            reply = { paramTypes: [], names: [], types: [], rows: [], affectedRows: 0 };
            parsers = [];
          }
          break;
        }
        case 0x49:
          // EmptyQueryResponse: an empty statement's whole answer (no CommandComplete follows).
          if (each) {
            each.push(reply);
            reply = { paramTypes: [], names: [], types: [], rows: [], affectedRows: 0 };
            parsers = [];
          }
          break;
        case 0x45: {
          // ErrorResponse
          if (reply.error) break;
          reply.error = readErrorResponse(b, p, next);
          break;
        }
        case 0x41: {
          // NotificationResponse: process id, channel, payload
          const z = b.indexOf(0, p + 4);
          const channel = b.toString('utf8', p + 4, z);
          const payload = b.toString('utf8', z + 1, b.indexOf(0, z + 1));
          queueMicrotask(() => this.onNotification(channel, payload));
          break;
        }
        case 0x47:
        case 0x48:
        case 0x57:
          // CopyIn/CopyOut/CopyBoth: not something a parameterized statement here sends.
          reply.error ??= new PostgresError('COPY is not supported through this statement path');
          break;
        default:
        // ParseComplete, BindComplete, NoData, EmptyQueryResponse, ReadyForQuery, notices, parameter status.
      }
      at = next;
    }
    if (each && reply.error) each.push(reply);
    return first;
  }
}
