/**
 * One server-sent event stream (docs/realtime.md). Frames are queued on a byte-counted
 * ReadableStream: the listener pulls from it only as fast as the client's socket takes
 * them, so what waits here is exactly what the client has not read. When more than
 * realtime.buffer_bytes stays waiting (see `cutIfBehind`), the stream is cut (its queue
 * dropped with it); the client
 * reconnects with Last-Event-ID and replays from the outbox instead of from our memory.
 */
import type { Identity, Principal } from './principal';

const encoder = new TextEncoder();

/** One SSE frame as bytes; shared by every stream it goes to. */
export function frame(event: string, data: unknown, id?: number): Uint8Array {
  const head = id === undefined ? '' : `id: ${id}\n`;
  return encoder.encode(`${head}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

export const HEARTBEAT = encoder.encode(': keep-alive\n\n');
/** The first bytes of every stream: the listener sends the headers with them, EventSource retries after 2 s. */
export const OPENING = encoder.encode('retry: 2000\n\n');

/** How long a queue may stay over realtime.buffer_bytes (up to four times it) before the stream is cut. */
const BEHIND_MS = 1000;

export type EndReason = 'client' | 'slow' | 'expired' | 'revoked' | 'shutdown' | 'error';

export class Stream {
  readonly id = crypto.randomUUID();
  /** The last event id this stream has been given (or skipped as not its own). */
  cursor = 0;
  /** Fed by the instance's reader; false while replaying from the outbox. */
  live = false;
  closed = false;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  readonly body: ReadableStream<Uint8Array>;
  private timer?: ReturnType<typeof setTimeout>;
  /** When the queue was first seen over the bound (undefined: within it). */
  private behindSince?: number;
  /** Who waits for the client to take what is queued (`drained`). */
  private waiters: (() => void)[] = [];

  constructor(
    readonly principal: Principal,
    readonly identity: Identity,
    readonly identityKey: string,
    readonly tables: ReadonlySet<string>,
    readonly channels: ReadonlySet<string>,
    /** realtime.buffer_bytes when the stream opened. */
    readonly limitBytes: number,
    private readonly onEnd: (s: Stream, why: EndReason) => void,
  ) {
    this.body = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          this.controller = c;
          c.enqueue(OPENING);
        },
        // Called when the queue is within the bound again: whoever waits for that goes on.
        pull: () => this.wake(),
        cancel: () => this.end('client'),
      },
      { highWaterMark: limitBytes, size: (chunk) => chunk?.byteLength ?? 0 },
    );
  }

  /** Bytes queued for a client that has not read them yet. */
  get queued(): number {
    return this.limitBytes - (this.controller.desiredSize ?? 0);
  }

  /**
   * Resolves once what waits for the client is within the bound again (the client has read
   * it), or the stream has ended. A replay reads its next page only then, so it goes at the
   * client's pace instead of queueing the whole backlog.
   */
  drained(): Promise<void> {
    if (this.closed || this.queued <= this.limitBytes) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const resolve of waiting) resolve();
  }

  /** Queue a frame; false when the stream is closed. */
  write(chunk: Uint8Array): boolean {
    if (this.closed) return false;
    this.controller.enqueue(chunk);
    return true;
  }

  /**
   * Cut the stream when the client does not keep up: more than the bound still waiting a
   * second after it was first seen over it, or more than four times the bound at any time.
   * Asked before each page of events (and with each heartbeat), not per frame: a page is
   * queued at once, and a client that reads as fast as it can drains it soon after.
   */
  cutIfBehind(now = performance.now()): boolean {
    if (this.closed) return false;
    const queued = this.queued;
    if (queued <= this.limitBytes) {
      this.behindSince = undefined;
      return false;
    }
    // Over the bound: cut at once past four times it, or when still over a second later.
    this.behindSince ??= now;
    if (queued <= 4 * this.limitBytes && now - this.behindSince < BEHIND_MS) return false;
    this.end('slow');
    return true;
  }

  /** An event of the outbox: sent when newer than the cursor (a replay and the live feed may overlap). */
  deliver(id: number, chunk: Uint8Array | null): boolean {
    if (id <= this.cursor) return !this.closed;
    this.cursor = id;
    return chunk ? this.write(chunk) : !this.closed;
  }

  /** End the stream when the access token expires: `event: expired` first. */
  expireAt(ms: number): void {
    const wait = Math.max(0, ms - Date.now());
    this.timer = setTimeout(() => this.end('expired', frame('expired', {})), Math.min(wait, 2_147_000_000));
  }

  /**
   * Close: a last frame is flushed after what is queued; a slow client's queue is
   * dropped with its connection (error() discards the queue, close() would keep it).
   */
  end(why: EndReason, last?: Uint8Array): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    try {
      if (why === 'slow' || why === 'client') this.controller.error(new Error(`stream ended: ${why}`));
      else {
        if (last) this.controller.enqueue(last);
        this.controller.close();
      }
    } catch {
      // already closed by the client
    }
    this.wake();
    this.onEnd(this, why);
  }
}
