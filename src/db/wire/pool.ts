/** The external wire path's connections (src/db/external-wire.ts). */
import type { QueryResult } from '../engine';
import { WireConnection } from './connection';
import { connectionError } from './errors';
import { NO_OPTIONS } from './options';
import type { ResolvedOptions, WirePoolOptions, WireStatement } from './resolved-options';

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
    return conn ?? (await WireConnection.open(this.o, this.opts.connectTimeoutMs, this.opts.unnamed === true));
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
