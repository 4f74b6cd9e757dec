/**
 * A connection of the external wire path (src/db/external-wire.ts): opened (TLS: ./tls.ts,
 * authentication: ./auth.ts), then batches written in one write each and their answers read.
 */
import { once } from 'node:events';
import net from 'node:net';
import { AnswerTooLargeError, type QueryResult } from '../engine';
import { BIND, DESCRIBE, EXECUTE, LARGE, PARSE, SYNC, Writer } from '../wire-writer';
import { Authentication } from './auth';
import { connectionError, normalizeConnectError, readErrorResponse } from './errors';
import { NO_OPTIONS, type WireOptions } from './options';
import { PreparedStatements } from './prepared';
import type { Parser, ResolvedOptions, WireStatement } from './resolved-options';
import { secure } from './tls';

interface Column {
  name: string;
  type: number;
  parser: Parser | undefined;
}

interface Prepared {
  name: string;
  columns: Column[];
}

/** One statement's answer while a batch is read. */
interface Answer {
  columns: Column[];
  rows: Record<string, unknown>[];
  count: number;
}

export class WireConnection {
  broken = false;
  lastUsed = 0;
  /** When the connection is closed instead of kept idle (performance.now() time; the pool's max_lifetime). */
  expiresAt = Number.POSITIVE_INFINITY;
  private readonly w = new Writer();
  private input = Buffer.allocUnsafe(64 * 1024);
  private inputLength = 0;
  /** The exchange waiting for ReadyForQuery, with what it read so far. */
  private waiting: { resolve: () => void; reject: (e: unknown) => void } | null = null;
  private onMessage: (code: number, body: Buffer) => void = () => {};
  /** The first ErrorResponse of the exchange under way (or a value that could not be read). */
  private error: unknown = null;
  /** Statements prepared on this connection, by text: their names and result columns. */
  private readonly prepared = new PreparedStatements<Prepared>(this.w, 'basalt_wire_');

  private constructor(
    private readonly socket: net.Socket,
    private readonly parsers: Record<number, Parser>,
    /** Nothing kept prepared: each statement parsed as the unnamed one (WirePoolOptions.unnamed). */
    private readonly unnamed: boolean,
  ) {
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 60_000);
    socket.on('data', (chunk: Buffer) => this.data(chunk));
    socket.on('error', (e: Error & { code?: string }) => this.fail(connectionError(e.code ?? 'ECONNRESET', e.message)));
    socket.on('close', () => this.fail(connectionError('CONNECTION_CLOSED', 'the database closed the connection')));
  }

  static async open(o: ResolvedOptions, timeoutMs: number, unnamed = false): Promise<WireConnection> {
    const raw = o.path ? net.connect({ path: o.path }) : net.connect({ host: o.host[0], port: o.port[0] ?? 5432 });
    let conn: WireConnection | undefined;
    let socket: net.Socket = raw;
    const timer = setTimeout(() => {
      const e = connectionError('CONNECT_TIMEOUT', 'connecting to the database timed out');
      conn?.fail(e);
      raw.destroy(e);
      socket.destroy(e);
    }, timeoutMs);
    try {
      await once(raw, 'connect');
      if (o.ssl !== false && o.ssl !== undefined && o.ssl !== 'disable') socket = await secure(raw, o);
      const c = new WireConnection(socket, o.parsers, unnamed);
      conn = c;
      await new Promise<void>((resolve, reject) => {
        c.waiting = { resolve, reject };
        c.startup(o).catch((e) => c.fail(e));
      });
      if (c.error) throw c.error;
      const lifetime = typeof o.max_lifetime === 'function' ? o.max_lifetime() : o.max_lifetime;
      if (lifetime) c.expiresAt = performance.now() + lifetime * 1000;
      return c;
    } catch (e) {
      if (conn) conn.close();
      else socket.destroy();
      throw normalizeConnectError(e);
    } finally {
      clearTimeout(timer);
    }
  }

  close(): void {
    this.broken = true;
    if (!this.socket.destroyed) this.socket.end(Buffer.from([0x58, 0, 0, 0, 4])); // Terminate
  }

  private fail(e: unknown): void {
    this.broken = true;
    const w = this.waiting;
    this.waiting = null;
    // A FATAL error the server sent before closing says more than the closing does.
    w?.reject(this.error ?? e);
  }

  private data(chunk: Buffer): void {
    const need = this.inputLength + chunk.length;
    if (need > this.input.length) {
      const next = Buffer.allocUnsafe(Math.max(this.input.length * 2, need));
      this.input.copy(next, 0, 0, this.inputLength);
      this.input = next;
    }
    chunk.copy(this.input, this.inputLength);
    this.inputLength = need;
    const b = this.input;
    let at = 0;
    while (at + 5 <= this.inputLength) {
      const next = at + 1 + b.readInt32BE(at + 1);
      if (next > this.inputLength) break;
      const code = b[at]!;
      const body = b.subarray(at + 5, next);
      at = next;
      if (code === 0x45) this.error ??= readErrorResponse(body);
      else if (code === 0x5a) {
        // ReadyForQuery: the exchange is over.
        const w = this.waiting;
        this.waiting = null;
        w?.resolve();
      } else {
        try {
          this.onMessage(code, body);
        } catch (e) {
          // A value its parser refused: the exchange is read to its end, then fails with it.
          this.error ??= e;
        }
      }
    }
    if (at > 0) {
      b.copy(b, 0, at, this.inputLength);
      this.inputLength -= at;
    }
    if (!this.waiting && this.input.length > LARGE && this.inputLength === 0)
      this.input = Buffer.allocUnsafe(64 * 1024);
  }

  private async startup(o: ResolvedOptions): Promise<void> {
    const params: Record<string, string> = { user: o.user, database: o.database, client_encoding: 'UTF8' };
    for (const [k, v] of Object.entries(o.connection))
      if (v !== undefined && v !== '' && v !== false) params[k] = String(v);
    const w = this.w.reset();
    const start = w.at;
    w.int32(0).int32(196608);
    for (const [k, v] of Object.entries(params)) w.cstring(k).cstring(v);
    w.byte(0);
    w.buf.writeInt32BE(w.at - start, start);
    const auth = new Authentication(o);
    this.onMessage = (code, body) => {
      if (code !== 0x52) return; // ParameterStatus, BackendKeyData, notices
      auth
        .answer(body, this.w)
        .then((answer) => {
          if (answer) this.socket.write(Buffer.from(answer.view()));
        })
        .catch((e) => {
          this.fail(e);
          this.socket.destroy();
        });
    };
    this.socket.write(Buffer.from(w.view()));
  }

  /**
   * Run `statements` as one implicit transaction: one write ended by a single Sync, their
   * results in order. The first error is thrown; nothing of the batch stays. Inside a
   * transaction opened by BEGIN (`inTransaction`, a reserved connection) the Sync ends nothing:
   * a failed statement leaves that transaction aborted, so a statement gone stale is not run
   * again in it.
   */
  async batch(statements: readonly WireStatement[], opts: WireOptions = NO_OPTIONS): Promise<QueryResult[]> {
    const maxAnswerBytes = opts.maxAnswerBytes ?? 0;
    // A statement gone stale (undefined): all were let go of, and the batch, rolled back as a
    // whole, runs once more parsed anew; outside a transaction only.
    return (
      (await this.exchange(statements, maxAnswerBytes, opts.inTransaction !== true)) ??
      (await this.exchange(statements, maxAnswerBytes, false))!
    );
  }

  /** One write of `statements` and its answer; undefined when a statement was stale and `mayRerun` (PreparedStatements.failed). */
  private async exchange(
    statements: readonly WireStatement[],
    maxAnswerBytes: number,
    mayRerun: boolean,
  ): Promise<QueryResult[] | undefined> {
    if (this.broken) throw connectionError('CONNECTION_CLOSED', 'the connection was closed');
    // Before anything is written: the statements to close stay queued, the prepared ones as they were.
    Writer.checkBindCounts(statements);
    const w = this.w.reset();
    const prepared = this.prepared;
    prepared.begin();
    const plan: Prepared[] = [];
    for (const st of statements) {
      let p = this.unnamed ? undefined : prepared.get(st.sql);
      if (p === undefined) {
        // Unnamed: replaced by the next Parse, after its Bind has used it.
        p = { name: this.unnamed ? '' : prepared.name(), columns: [] };
        w.begin(PARSE).cstring(p.name).cstring(st.sql).int16(0).end();
        w.begin(DESCRIBE).byte(0x53).cstring(p.name).end(); // its result columns, kept with it
        if (!this.unnamed) prepared.add(st.sql, p);
      }
      plan.push(p);
      w.begin(BIND).cstring('').cstring(p.name).int16(0).count16(st.params.length);
      for (const v of st.params) {
        if (v === null || v === undefined) w.int32(-1);
        else w.text(typeof v === 'string' ? v : String(v));
      }
      w.int16(0).end(); // result columns: all text
      w.begin(EXECUTE).cstring('').int32(0).end();
    }
    w.bare(SYNC);

    const answers: Answer[] = [];
    let current: Answer = { columns: plan[0]?.columns ?? [], rows: [], count: 0 };
    this.error = null;
    // The rows' bytes so far, against `maxAnswerBytes` (WaitOptions): past it rows are dropped as they come.
    let rowBytes = 0;
    let over = false;
    this.onMessage = (code, body) => {
      switch (code) {
        case 0x44: {
          // DataRow
          if (maxAnswerBytes > 0 && (over || (rowBytes += body.length) > maxAnswerBytes)) {
            if (!over) for (const a of [...answers, current]) a.rows = [];
            over = true;
            break;
          }
          const cols = current.columns;
          const n = body.readInt16BE(0);
          let p = 2;
          const row: Record<string, unknown> = {};
          for (let i = 0; i < n; i++) {
            const len = body.readInt32BE(p);
            p += 4;
            const col = cols[i]!;
            if (len < 0) {
              row[col.name] = null;
              continue;
            }
            const parse = col.parser;
            row[col.name] =
              parse === undefined
                ? body.toString('utf8', p, p + len)
                : parse.array === true
                  ? parse(body.toString('utf8', p + 1, p + len))
                  : parse(body.toString('utf8', p, p + len));
            p += len;
          }
          current.rows.push(row);
          break;
        }
        case 0x54: {
          // RowDescription (of a statement described in this batch)
          const n = body.readInt16BE(0);
          let p = 2;
          const cols: Column[] = new Array(n);
          for (let i = 0; i < n; i++) {
            const z = body.indexOf(0, p);
            const name = body.toString('utf8', p, z);
            const type = body.readInt32BE(z + 1 + 6);
            cols[i] = { name, type, parser: this.parsers[type] };
            p = z + 1 + 18;
          }
          plan[answers.length]!.columns = cols;
          current.columns = cols;
          break;
        }
        case 0x43: {
          // CommandComplete: "SELECT 10", "INSERT 0 5", "UPDATE 3", …
          const tag = body.toString('utf8', 0, body.length - 1);
          const n = Number.parseInt(tag.slice(tag.lastIndexOf(' ') + 1), 10);
          current.count = Number.isNaN(n) ? 0 : n;
          answers.push(current);
          current = { columns: plan[answers.length]?.columns ?? [], rows: [], count: 0 };
          break;
        }
        default:
        // ParseComplete, BindComplete, CloseComplete, ParameterDescription, NoData, notices, parameter status.
      }
    };
    await new Promise<void>((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.socket.write(Buffer.from(w.view()));
    });
    if (this.w.buf.length > LARGE) this.w.buf = Buffer.allocUnsafe(16 * 1024);
    const failed = this.error as { code?: unknown } | null;
    if (failed) {
      if (prepared.failed(failed.code, mayRerun)) return undefined;
      throw failed;
    }
    if (answers.length < statements.length) throw new Error('the batch ended before all its statements answered');
    if (over) throw new AnswerTooLargeError(maxAnswerBytes);
    return answers.map((a) => ({
      rows: a.rows,
      rowCount: a.columns.length > 0 ? a.rows.length : a.count,
      fields: a.columns.map((c) => ({ name: c.name, typeId: c.type })),
    }));
  }
}
