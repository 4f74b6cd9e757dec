/**
 * A server-sent events client for the realtime suites: fetch + eventsource-parser, the
 * events collected as they arrive, waits with generous bounds.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { eventually } from '../helpers/wait';

export interface SseEvent {
  id?: string;
  event: string;
  data: any;
}

export interface SseClient {
  status: number;
  headers: Headers;
  /** The error body when the stream was refused. */
  body?: any;
  /** The events received, unless opened with `keep: false`. */
  events: SseEvent[];
  /** How many events of each type arrived (kept or not). */
  counts: Map<string, number>;
  /** Comment lines seen (heartbeats). */
  comments: string[];
  /** The stream ended (by the server or close()). */
  ended: Promise<void>;
  isEnded(): boolean;
  /** Wait until `n` events of `type` (default change) arrived. */
  waitFor(n: number, type?: string, timeoutMs?: number): Promise<SseEvent[]>;
  of(type?: string): SseEvent[];
  close(): void;
}

/**
 * `keep: false` counts events without keeping them: for a suite that measures this
 * process's heap, where thousands of parsed events (and any stale reference to them)
 * would be counted as the server's.
 */
export async function openSse(
  url: string,
  headers: Record<string, string> = {},
  { keep = true }: { keep?: boolean } = {},
): Promise<SseClient> {
  const ctl = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: ctl.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const counts = new Map<string, number>();
  let done = false;
  const of = (type = 'change') => events.filter((e) => e.event === type);
  const client: SseClient = {
    status: res.status,
    headers: res.headers,
    events,
    counts,
    comments,
    ended: Promise.resolve(),
    isEnded: () => done,
    of,
    async waitFor(n, type = 'change', timeoutMs = 20_000) {
      await eventually(() => (counts.get(type) ?? 0) >= n, {
        timeout: timeoutMs,
        what: () => `${n} ${type} events (have ${keep ? JSON.stringify(events) : JSON.stringify([...counts])})`,
      });
      return of(type);
    },
    close: () => ctl.abort(),
  };
  if (res.status !== 200) {
    client.body = await res.json().catch(() => undefined);
    done = true;
    return client;
  }
  const parser = createParser({
    onEvent: (m: EventSourceMessage) => {
      const event = m.event ?? 'message';
      const data = JSON.parse(m.data);
      counts.set(event, (counts.get(event) ?? 0) + 1);
      if (keep) events.push({ id: m.id, event, data });
    },
    onComment: (c) => comments.push(c),
  });
  client.ended = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body!) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
    } catch {
      // aborted or cut
    } finally {
      done = true;
    }
  })();
  return client;
}
