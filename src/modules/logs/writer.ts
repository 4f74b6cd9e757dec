/**
 * The request log's buffer (docs/logs.md): the listener hands it every answered request
 * (`record`, src/http/server.ts), which only decides whether to keep it (logs.enabled;
 * successes with the chance `keepChance` gives, status 400 and above always) and pushes a row.
 * A kept success carries the weight 1/chance: the requests it stands for. Rows are
 * written in one multi-row insert per batch (`insertRows`) every FLUSH_EVERY_MS, or at once
 * when BATCH_ROWS are waiting, and at shutdown. At most MAX_BUFFERED rows wait: beyond,
 * and when a write fails, rows are dropped and counted (basalt_request_log_dropped_total).
 */
import type { Queryable } from '../../db/engine';
import type { Settings } from '../../config/settings';
import type { Logger } from '../../log';
import type { RequestFailure, RequestInfo, RequestLogSink } from '../../http/request-info';
import { loggedPath } from './redact';

export const FLUSH_EVERY_MS = 1000;
export const BATCH_ROWS = 500;
export const MAX_BUFFERED = 20_000;
/** A failed write is logged at most this often. */
const WARN_EVERY_MS = 60_000;

/** A request as noted on the request path; its path is redacted when written. */
export interface Pending {
  at: number;
  requestId: string;
  method: string;
  url: string;
  path: string;
  status: number;
  ms: number;
  area: string;
  keyId: string | null;
  userId: string | null;
  ip: string | null;
  failure: RequestFailure | null;
  /** How many requests the row stands for (1 / the chance it was kept with). */
  weight: number;
}

/**
 * One statement for the whole batch, its rows as one JSON value: a single text parameter, so the
 * statement stays prepared and goes in one exchange on both engines' wire paths (arrays as
 * parameters cost a describe round and a serializer pass each), and `json_to_recordset` turns
 * each row into typed columns in one pass (docs/bench/2026-11-29-request-log.md).
 */
const INSERT = `INSERT INTO basalt.request_log (at, request_id, method, path, status, duration_ms, area, key_id, user_id, ip, error, weight)
  SELECT to_timestamp(a / 1000), r, m, p, s, d, ar, k, u, i, e, coalesce(w, 1) FROM json_to_recordset($1::json)
    AS x(a float8, r text, m text, p text, s int, d real, ar text, k uuid, u uuid, i text, e jsonb, w real)`;

export async function insertRows(db: Queryable, rows: readonly Pending[]): Promise<void> {
  const values = rows.map((r) => ({
    a: r.at,
    r: r.requestId,
    m: r.method.slice(0, 16),
    p: loggedPath(r.path, r.url),
    s: r.status,
    d: r.ms,
    ar: r.area,
    k: r.keyId,
    u: r.userId,
    i: r.ip,
    e: r.failure,
    // Left out (a null column, so 1) for the usual weight of 1.
    w: r.weight === 1 ? undefined : r.weight,
  }));
  await db.query(INSERT, [JSON.stringify(values)]);
}

export interface WriterCounts {
  /** Rows written since start. */
  written: number;
  /** Rows dropped since start: the buffer was full, or their write failed. */
  dropped: number;
  /** Rows waiting now. */
  buffered: number;
}

export class RequestLogWriter implements RequestLogSink {
  private rows: Pending[] = [];
  private timer?: ReturnType<typeof setTimeout>;
  private running?: Promise<void>;
  private closed = false;
  private written = 0;
  private dropped = 0;
  private warnedAt = 0;
  /** logs.sample_rate parsed, and the text it was parsed from (the setting is live). */
  private rateText = '';
  private rate = 1;
  /** Successes answered in the current second (`second`) and in the one before (logs.max_per_second). */
  private second = 0;
  private seenNow = 0;
  private seenBefore = 0;

  constructor(private readonly d: { db: Queryable; settings: Settings; log: Logger }) {}

  record(method: string, url: string, path: string, status: number, ms: number, info: RequestInfo): void {
    const settings = this.d.settings;
    if (!settings.get('logs.enabled')) return;
    const now = Date.now();
    let weight = 1;
    if (status < 400) {
      const chance = this.keepChance(now);
      if (chance < 1) {
        if (!(Math.random() < chance)) return;
        weight = 1 / chance;
      }
    }
    if (this.closed || this.rows.length >= MAX_BUFFERED) {
      this.dropped++;
      return;
    }
    this.rows.push({
      at: now - ms,
      requestId: info.id,
      method,
      url,
      path,
      status,
      ms,
      area: info.area.name,
      keyId: info.keyId ?? null,
      userId: info.userId ?? null,
      ip: info.ip,
      failure: info.failure ?? null,
      weight,
    });
    if (this.rows.length >= BATCH_ROWS) void this.flush();
    else this.timer ??= this.arm();
  }

  /**
   * The chance a success is kept: logs.sample_rate, lowered when more than logs.max_per_second
   * would be kept, so that about that many are: successes a second are those of the second
   * before, or of this one so far when more (a burst is thinned as it comes).
   */
  private keepChance(now: number): number {
    const rate = this.sampleRate();
    const max = this.d.settings.get('logs.max_per_second');
    if (max === 0 || rate === 0) return rate;
    const second = Math.floor(now / 1000);
    if (second !== this.second) {
      this.seenBefore = second === this.second + 1 ? this.seenNow : 0;
      this.seenNow = 0;
      this.second = second;
    }
    const kept = Math.max(++this.seenNow, this.seenBefore) * rate;
    return kept <= max ? rate : (rate * max) / kept;
  }

  private sampleRate(): number {
    const text = this.d.settings.get('logs.sample_rate');
    if (text !== this.rateText) {
      const n = Number(text);
      this.rate = Number.isFinite(n) ? Math.min(1, Math.max(0, n)) : 1;
      this.rateText = text;
    }
    return this.rate;
  }

  private arm(): ReturnType<typeof setTimeout> {
    const t = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, FLUSH_EVERY_MS);
    t.unref?.();
    return t;
  }

  /** Write every waiting row now (one write at a time; a call during one waits for it and what came since). */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    return (this.running ??= this.drain().finally(() => {
      this.running = undefined;
      // Rows noted after the last batch was taken: the next timer writes them.
      if (this.rows.length && !this.closed) this.timer ??= this.arm();
    }));
  }

  private async drain(): Promise<void> {
    while (this.rows.length) {
      const batch = this.rows.length <= BATCH_ROWS ? this.rows : this.rows.slice(0, BATCH_ROWS);
      this.rows = batch === this.rows ? [] : this.rows.slice(BATCH_ROWS);
      try {
        await insertRows(this.d.db, batch);
        this.written += batch.length;
      } catch (e) {
        this.dropped += batch.length;
        const now = Date.now();
        if (now - this.warnedAt >= WARN_EVERY_MS) {
          this.warnedAt = now;
          this.d.log.warn('request log: a batch could not be written; its rows are dropped', {
            rows: batch.length,
            cause: e,
          });
        }
      }
    }
  }

  /** At shutdown, once the listeners have answered their last request: write what waits, take no more. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    await this.flush();
  }

  counts(): WriterCounts {
    return { written: this.written, dropped: this.dropped, buffered: this.rows.length };
  }
}
