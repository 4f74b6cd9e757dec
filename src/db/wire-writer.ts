/**
 * Frontend messages of PostgreSQL's wire protocol, written into one buffer that grows and is
 * reused: the embedded engine's statements (src/db/embedded-wire.ts) and external PostgreSQL's
 * batches (src/db/wire/connection.ts); the statements both keep prepared (src/db/wire/prepared.ts).
 */

// Frontend message codes.
export const PARSE = 0x50;
export const BIND = 0x42;
export const DESCRIBE = 0x44;
export const EXECUTE = 0x45;
export const FLUSH = 0x48;
export const SYNC = 0x53;
export const CLOSE = 0x43;

/**
 * Statements stay prepared in a session, by text, this many at most (the least recently used
 * is closed beyond): the text of an API statement repeats (same entity, fields and filter
 * shape), and parsing and planning a statement under row-level security costs more than
 * running it.
 */
export const PREPARED_MAX = 64;
/** SQLSTATEs of a prepared statement the session no longer has (26000), or whose result changed shape with the schema (0A000). */
export const STALE = new Set(['26000', '0A000']);
/** Buffers past this size are let go after the exchange that needed them. */
export const LARGE = 1024 * 1024;
/**
 * The most bind parameters one statement can have: the protocol counts them in 16 bits,
 * unsigned (PostgreSQL refuses more). The Database API refuses a request past it with a 400
 * (src/modules/database/query-builder.ts).
 */
export const MAX_BIND_PARAMS = 65_535;

/** A statement with more values than one Bind message can carry; nothing was written. */
export class TooManyBindParamsError extends Error {
  constructor(readonly count: number) {
    super(
      `a statement takes at most ${MAX_BIND_PARAMS.toLocaleString('en')} bind parameters (PostgreSQL's protocol limit); this one has ${count.toLocaleString('en')}`,
    );
    this.name = 'TooManyBindParamsError';
  }
}

export class Writer {
  /**
   * Refuse, before a batch writes anything or changes what its session keeps (statements to
   * close, statements prepared), a statement whose values one Bind cannot carry.
   */
  static checkBindCounts(statements: readonly { params: readonly unknown[] }[]): void {
    for (const st of statements)
      if (st.params.length > MAX_BIND_PARAMS) throw new TooManyBindParamsError(st.params.length);
  }

  buf = Buffer.allocUnsafe(16 * 1024);
  at = 0;
  private start = 0;

  reset(): this {
    this.at = 0;
    return this;
  }
  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }
  begin(code: number): this {
    this.room(5);
    this.start = this.at;
    this.buf[this.at] = code;
    this.at += 5;
    return this;
  }
  end(): this {
    this.buf.writeInt32BE(this.at - this.start - 1, this.start + 1);
    return this;
  }
  int16(v: number): this {
    this.room(2);
    this.buf.writeInt16BE(v, this.at);
    this.at += 2;
    return this;
  }
  /** A count of the protocol (16 bits, unsigned): bind parameters and their formats. */
  count16(n: number): this {
    if (!Number.isInteger(n) || n < 0 || n > MAX_BIND_PARAMS) throw new TooManyBindParamsError(n);
    this.room(2);
    this.buf.writeUInt16BE(n, this.at);
    this.at += 2;
    return this;
  }
  int32(v: number): this {
    this.room(4);
    this.buf.writeInt32BE(v, this.at);
    this.at += 4;
    return this;
  }
  cstring(s: string): this {
    this.room(Buffer.byteLength(s) + 1);
    this.at += this.buf.write(s, this.at, 'utf8');
    this.buf[this.at++] = 0;
    return this;
  }
  /** A length-prefixed text value. */
  text(s: string): this {
    const n = Buffer.byteLength(s);
    this.int32(n);
    this.room(n);
    this.buf.write(s, this.at, 'utf8');
    this.at += n;
    return this;
  }
  bytes(b: Uint8Array): this {
    this.int32(b.byteLength);
    this.room(b.byteLength);
    this.buf.set(b, this.at);
    this.at += b.byteLength;
    return this;
  }
  /** Bytes as they are, without a length. */
  raw(b: Uint8Array): this {
    this.room(b.byteLength);
    this.buf.set(b, this.at);
    this.at += b.byteLength;
    return this;
  }
  byte(v: number): this {
    this.room(1);
    this.buf[this.at++] = v;
    return this;
  }
  /** A message without a body (Flush, Sync). */
  bare(code: number): this {
    return this.begin(code).end();
  }
  view(): Uint8Array {
    return this.buf.subarray(0, this.at);
  }
}
