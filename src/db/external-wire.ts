/**
 * Batches of statements known up front (`Db.atOnce`) on external PostgreSQL, spoken in the wire
 * protocol on connections of their own: Parse (first time) + Describe + Bind + Execute for each
 * statement, then a single Sync, in one write and one round trip.
 *
 * Why not through postgres.js: it ends every query with a Sync, so a transaction of statements
 * sent together needs BEGIN and COMMIT around them, four statements for PostgreSQL to run and
 * four results for Basalt to handle where two do (a user's select: the identity, then the
 * select). PostgreSQL runs what comes between two Syncs as one implicit transaction: committed
 * at the Sync, or rolled back there when a statement fails (the ones after it are skipped), so a
 * `set_config(…, true)` of the batch lasts until its end and no longer, and nothing of a failed
 * batch stays open on the connection (docs/database.md, "Users' own data").
 *
 * The connections are opened with the pool's own settings as postgres.js resolved them (host,
 * port or socket path, user, password, database, run-time parameters such as statement_timeout
 * and application_name), with TLS as postgres.js sets it up for the URL's `sslmode`,
 * authenticated by password, MD5 or SCRAM-SHA-256, and their rows are parsed with the pool's own
 * parsers (the same values as postgres.js returns). A URL this path does not speak (several
 * hosts, target_session_attrs, direct TLS negotiation, a custom socket) keeps the postgres.js
 * path (`wireUnsupported`). Values go as text typed by the server, so only
 * `batchable` ones (strings, finite numbers, nulls); statements stay prepared per connection by
 * their text (at most PREPARED_MAX, the least recently used closed beyond), with their result
 * columns, so a statement seen before is only bound and run; a statement gone or outdated by a
 * schema change (26000, 0A000) makes the batch, rolled back as a whole, run once more parsed
 * anew. How many connections are in use at once is bounded by the pool's wait gate
 * (src/db/wait-gate.ts); an idle connection closes after `idleTimeoutMs`, and one released past
 * its lifetime (the pool's `max_lifetime`, postgres.js's random 30 to 60 minutes) is closed
 * then. A connection that cannot be made (refused by the server, TLS, a SCRAM exchange that does
 * not check out) is "database unavailable" (`normalizeConnectError`); the methods and modes are
 * checked by test/database/external-wire-auth.test.ts against a scratch cluster.
 */
import crypto from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { AnswerTooLargeError, DatabaseUnavailableError, normalizeDbError, type QueryResult } from './engine';
import { BIND, CLOSE, DESCRIBE, EXECUTE, LARGE, PARSE, PREPARED_MAX, STALE, SYNC, Writer } from './wire-writer';
import { BoundedMap } from '../util/bounded-map';
import { PostgresError, readErrorResponse } from './wire/errors';
import { NO_OPTIONS, type WireOptions } from './wire/options';

type Parser = ((text: string) => unknown) & { array?: boolean };

/** What postgres.js resolved for its pool (`sql.options`), the parts used here. */
export interface ResolvedOptions {
  host: string[];
  port: number[];
  path: string | false;
  user: string;
  pass: string | (() => string | Promise<string>);
  database: string;
  ssl: unknown;
  sslnegotiation?: unknown;
  socket?: unknown;
  target_session_attrs?: unknown;
  /** Seconds a connection lives (postgres.js's default: a random 30 to 60 minutes for each); none when falsy. */
  max_lifetime?: number | (() => number) | null;
  connection: Record<string, string | number | boolean | undefined>;
  parsers: Record<number, Parser>;
}

/** Why this path cannot serve the pool (it then keeps postgres.js), or null when it can. */
export function wireUnsupported(o: ResolvedOptions): string | null {
  if (o.sslnegotiation) return 'sslnegotiation';
  if (o.host.length > 1) return 'several hosts';
  if (o.socket) return 'a custom socket';
  if (o.target_session_attrs) return 'target_session_attrs';
  return null;
}

export interface WirePoolOptions {
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

/** A statement of a batch: its values are strings, finite numbers or nulls. */
export interface WireStatement {
  sql: string;
  params: readonly unknown[];
}

/** A connection failure, with a code normalizeDbError maps to "database unavailable". */
function connectionError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

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

class WireConnection {
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
  /** Statements prepared on this connection: text → name and result columns; the one pushed out is closed in the batch being written. */
  private readonly prepared = new BoundedMap<string, Prepared>(PREPARED_MAX, (_sql, old) =>
    this.w.begin(CLOSE).byte(0x53).cstring(old.name).end(),
  );
  private named = 0;
  /** Names to close at the start of the next batch (let go of, or left uncertain by a failed batch). */
  private closing: string[] = [];

  private constructor(
    private readonly socket: net.Socket,
    private readonly parsers: Record<number, Parser>,
  ) {
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 60_000);
    socket.on('data', (chunk: Buffer) => this.data(chunk));
    socket.on('error', (e: Error & { code?: string }) => this.fail(connectionError(e.code ?? 'ECONNRESET', e.message)));
    socket.on('close', () => this.fail(connectionError('CONNECTION_CLOSED', 'the database closed the connection')));
  }

  static async open(o: ResolvedOptions, timeoutMs: number): Promise<WireConnection> {
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
      const c = new WireConnection(socket, o.parsers);
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
    let nonce = '';
    let serverSignature: Buffer = Buffer.alloc(0);
    const pass = async () => (typeof o.pass === 'function' ? await o.pass() : o.pass);
    const send = (msg: Writer) => this.socket.write(Buffer.from(msg.view()));
    this.onMessage = (code, body) => {
      if (code !== 0x52) return; // ParameterStatus, BackendKeyData, notices
      const type = body.readInt32BE(0);
      const answer = async () => {
        if (type === 0) return;
        if (type === 3)
          return void send(
            this.w
              .reset()
              .begin(0x70)
              .cstring(await pass())
              .end(),
          );
        if (type === 5) {
          const inner = md5(Buffer.from((await pass()) + o.user));
          const outer = 'md5' + md5(Buffer.concat([Buffer.from(inner), body.subarray(4, 8)]));
          return void send(this.w.reset().begin(0x70).cstring(outer).end());
        }
        if (type === 10) {
          if (!body.toString('utf8', 4).split('\0').includes('SCRAM-SHA-256'))
            throw connectionError('UNSUPPORTED_AUTH', 'the server offers no SASL mechanism this path speaks');
          nonce = crypto.randomBytes(18).toString('base64');
          const first = Buffer.from('n,,n=*,r=' + nonce);
          return void send(this.w.reset().begin(0x70).cstring('SCRAM-SHA-256').bytes(first).end());
        }
        if (type === 11) {
          const res = Object.fromEntries(
            body
              .toString('utf8', 4)
              .split(',')
              .map((x) => [x[0]!, x.slice(2)]),
          );
          // RFC 5802: the server's nonce extends the client's; anything else is not this exchange.
          if (typeof res.r !== 'string' || res.r.length <= nonce.length || !res.r.startsWith(nonce))
            throw connectionError('SASL_NONCE_MISMATCH', "the server's SCRAM nonce does not extend the client's");
          const salted = crypto.pbkdf2Sync(await pass(), Buffer.from(res.s!, 'base64'), Number(res.i), 32, 'sha256');
          const clientKey = hmac(salted, 'Client Key');
          const auth = `n=*,r=${nonce},r=${res.r},s=${res.s},i=${res.i},c=biws,r=${res.r}`;
          serverSignature = hmac(hmac(salted, 'Server Key'), auth);
          const proof = xor(clientKey, hmac(crypto.createHash('sha256').update(clientKey).digest(), auth));
          const final = Buffer.from(`c=biws,r=${res.r},p=${proof.toString('base64')}`);
          return void send(this.w.reset().begin(0x70).raw(final).end());
        }
        if (type === 12) {
          if (serverSignature.length === 0)
            throw connectionError('SASL_SIGNATURE_MISMATCH', 'the server ended SCRAM before its challenge');
          const given = Buffer.from(body.toString('utf8', 4).split('\0', 1)[0]!.slice(2), 'base64');
          if (given.length !== serverSignature.length || !crypto.timingSafeEqual(given, serverSignature))
            throw connectionError('SASL_SIGNATURE_MISMATCH', 'the server did not return the correct signature');
          return;
        }
        throw connectionError('UNSUPPORTED_AUTH', `authentication method ${type} is not one this path speaks`);
      };
      answer().catch((e) => {
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
      (await this.exchange(statements, maxAnswerBytes, opts.inTransaction === true)) ??
      (await this.exchange(statements, maxAnswerBytes, true))!
    );
  }

  /** One write of `statements` and its answer; undefined when a statement was stale and `staleThrows` is false. */
  private async exchange(
    statements: readonly WireStatement[],
    maxAnswerBytes: number,
    staleThrows: boolean,
  ): Promise<QueryResult[] | undefined> {
    if (this.broken) throw connectionError('CONNECTION_CLOSED', 'the connection was closed');
    // Before anything is written: the statements to close stay queued, the prepared ones as they were.
    Writer.checkBindCounts(statements);
    const w = this.w.reset();
    // Closing a statement the session does not have is no error.
    for (const name of this.closing) w.begin(CLOSE).byte(0x53).cstring(name).end();
    this.closing = [];
    const plan: Prepared[] = [];
    const parsed: string[] = [];
    for (const st of statements) {
      let p = this.prepared.get(st.sql); // a use: now the most recently used
      if (p === undefined) {
        p = { name: `basalt_wire_${++this.named}`, columns: [] };
        w.begin(PARSE).cstring(p.name).cstring(st.sql).int16(0).end();
        w.begin(DESCRIBE).byte(0x53).cstring(p.name).end(); // its result columns, kept with it
        parsed.push(p.name);
        this.prepared.set(st.sql, p); // beyond PREPARED_MAX, closes the least recently used
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
      // Statements parsed by this batch may or may not exist now: closed before the next one,
      // and parsed again when needed. A stale statement: all are let go of, and the batch
      // (rolled back as a whole) runs once more.
      const stale = STALE.has(String(failed.code ?? ''));
      for (const [sql, p] of [...this.prepared]) {
        if (!stale && !parsed.includes(p.name)) continue;
        this.prepared.delete(sql);
        this.closing.push(p.name);
      }
      if (stale && !staleThrows) return undefined;
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

/** Connections for batches, opened on demand; how many are in use at once is bounded by the caller (the wait gate). */
export class WirePool {
  private readonly idle: WireConnection[] = [];
  private closed = false;
  private readonly sweeper: ReturnType<typeof setInterval>;

  constructor(
    private readonly o: ResolvedOptions,
    private readonly opts: WirePoolOptions,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, Math.min(opts.idleTimeoutMs, 10_000)));
    this.sweeper.unref?.();
  }

  /** Run `statements` as one transaction of their own (see WireConnection.batch; `maxAnswerBytes` bounds the answer). */
  async batch(
    statements: readonly WireStatement[],
    opts: { maxAnswerBytes?: number } = NO_OPTIONS,
  ): Promise<QueryResult[]> {
    const conn = await this.reserve();
    try {
      return await conn.batch(statements, opts);
    } finally {
      this.release(conn);
    }
  }

  /**
   * A connection for the caller alone until `release` (an open transaction: BEGIN in its first
   * batch, so the Syncs of the batches after it end no transaction, src/db/external.ts).
   */
  async reserve(): Promise<WireConnection> {
    if (this.closed) throw connectionError('CONNECTION_ENDED', 'the pool is closed');
    let conn = this.idle.pop();
    while (conn?.broken) {
      conn.close();
      conn = this.idle.pop();
    }
    return conn ?? (await WireConnection.open(this.o, this.opts.connectTimeoutMs));
  }

  /** Give back a connection `reserve` gave, with nothing open on it. */
  release(conn: WireConnection): void {
    // Past its lifetime (max_lifetime, as postgres.js recycles its own): closed instead of kept.
    if (conn.broken || this.closed || performance.now() >= conn.expiresAt) conn.close();
    else {
      conn.lastUsed = performance.now();
      this.idle.push(conn);
    }
  }

  private sweep(): void {
    const before = performance.now() - this.opts.idleTimeoutMs;
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const c = this.idle[i]!;
      if (c.broken || c.lastUsed < before || c.expiresAt <= performance.now()) {
        this.idle.splice(i, 1);
        c.close();
      }
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const c of this.idle.splice(0)) c.close();
  }
}

/**
 * TLS as postgres.js sets it up for the same `ssl` value: SSLRequest, then the handshake on the
 * same socket; `require`, `allow` and `prefer` do not verify the certificate, `verify-full` (or
 * true) does, an object is handed to `tls.connect`. A server without TLS is refused unless the
 * mode is `prefer` or `allow`, which then go on without it.
 */
async function secure(raw: net.Socket, o: ResolvedOptions): Promise<net.Socket> {
  const answer = once(raw, 'data');
  raw.write(Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])); // SSLRequest (80877103)
  const [first] = (await answer) as [Buffer];
  if (first[0] !== 0x53) {
    if (o.ssl === 'prefer' || o.ssl === 'allow') return raw;
    throw connectionError('ECONNREFUSED', 'the database does not accept TLS connections');
  }
  const host = o.host[0] ?? '';
  const options: tls.ConnectionOptions = { socket: raw, servername: net.isIP(host) ? undefined : host };
  if (o.ssl === 'require' || o.ssl === 'allow' || o.ssl === 'prefer') options.rejectUnauthorized = false;
  else if (typeof o.ssl === 'object' && o.ssl !== null) Object.assign(options, o.ssl);
  const secured = tls.connect(options);
  await once(secured, 'secureConnect');
  return secured;
}

/**
 * An error of the connect, TLS handshake or authentication as one normalizeDbError maps to
 * "database unavailable": the server refusing the connection (a wrong password, no pg_hba.conf
 * entry such as a non-TLS connection to a hostssl-only server, a database that is not there, too
 * many connections) is SQLSTATE 08004 with the server's message (no password in it), any other
 * failure (a TLS error, a SCRAM exchange that does not check out) 08001. UNSUPPORTED_AUTH stays:
 * the caller then keeps postgres.js (src/db/external.ts).
 */
function normalizeConnectError(e: unknown): unknown {
  const code = (e as { code?: unknown })?.code;
  if (code === 'UNSUPPORTED_AUTH' || normalizeDbError(e) instanceof DatabaseUnavailableError) return e;
  const message = (e as Error)?.message ?? String(e);
  if (e instanceof PostgresError)
    return connectionError('08004', `the database refused the connection: ${message} (${String(code)})`);
  return connectionError(
    '08001',
    `could not connect to the database (${typeof code === 'string' ? `${code}: ` : ''}${message})`,
  );
}

function md5(x: Buffer): string {
  return crypto.createHash('md5').update(x).digest('hex');
}

function hmac(key: Buffer, x: string): Buffer {
  return crypto.createHmac('sha256', key).update(x).digest();
}

function xor(a: Buffer, b: Buffer): Buffer {
  const out = Buffer.allocUnsafe(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! ^ b[i]!;
  return out;
}
