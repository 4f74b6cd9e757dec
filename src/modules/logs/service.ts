/**
 * The request log (docs/logs.md): what the listener hands over (the writer, writer.ts),
 * what the admin API, the panel's Logs screen and `basalt logs` read (store.ts), and its
 * retention (the `request log retention` worker, src/workers.ts). Reads write the waiting
 * rows first, so a request answered by this instance is found at once.
 */
import type { Platform } from '../../platform';
import type { RequestLogSink } from '../../http/request-info';
import { RequestLogWriter, type WriterCounts } from './writer';
import {
  auditOf,
  entriesOf,
  perMinute,
  pruneLog,
  searchLog,
  type LogEntry,
  type LogFilter,
  type MinuteCount,
} from './store';

const PRUNE_EVERY_MS = 60 * 60_000;
/** The widest range the per-minute chart covers. */
export const CHART_MAX_MINUTES = 24 * 60;

export interface RequestLogService extends RequestLogSink {
  search(
    f: LogFilter & { limit?: number; before?: string },
  ): Promise<{ entries: LogEntry[]; next_cursor: string | null }>;
  /** One request's rows and what administrators changed in it. */
  detail(requestId: string): Promise<{ entries: LogEntry[]; audit: Awaited<ReturnType<typeof auditOf>> }>;
  /** Requests and errors per minute of the range (at most CHART_MAX_MINUTES, ending at `until`), with the sampling in force. */
  minutes(
    f: LogFilter & { since: Date; until: Date },
  ): Promise<{ minutes: MinuteCount[]; sample_rate: number; max_per_second: number }>;
  prune(): Promise<number>;
  /** Prune now and hourly; resolves to the function that ends it (src/workers.ts). */
  startRetention(): () => Promise<void>;
  counts(): WriterCounts;
}

export function createRequestLogService(p: Platform): RequestLogService {
  const writer = new RequestLogWriter({ db: p.db, settings: p.settings, log: p.log });
  // After the listeners' last answer (serve stops them before the shutdown steps), before the database closes.
  p.onShutdown(() => writer.close());
  const db = p.db;
  const prune = () => pruneLog(db, p.settings.get('logs.retention_days'));
  return {
    record: (method, url, path, status, ms, info) => writer.record(method, url, path, status, ms, info),
    async search(f) {
      await writer.flush();
      return searchLog(db, f);
    },
    async detail(requestId) {
      await writer.flush();
      const [entries, audit] = [await entriesOf(db, requestId), await auditOf(db, requestId)];
      return { entries, audit };
    },
    async minutes(f) {
      await writer.flush();
      const earliest = new Date(f.until.getTime() - CHART_MAX_MINUTES * 60_000);
      const since = f.since < earliest ? earliest : f.since;
      const rate = Number(p.settings.get('logs.sample_rate'));
      return {
        minutes: await perMinute(db, { ...f, since }),
        sample_rate: Number.isFinite(rate) ? rate : 1,
        max_per_second: p.settings.get('logs.max_per_second'),
      };
    },
    prune,
    startRetention() {
      let running: Promise<unknown> = Promise.resolve();
      const run = () => {
        running = prune()
          .then((deleted) => {
            if (deleted)
              p.log.info('request log rows past retention deleted', {
                deleted,
                retention_days: p.settings.get('logs.retention_days'),
              });
          })
          .catch((e) => p.log.warn('request log retention failed', { cause: e }));
      };
      run();
      const timer = setInterval(run, PRUNE_EVERY_MS);
      timer.unref();
      return async () => {
        clearInterval(timer);
        await running;
      };
    },
    counts: () => writer.counts(),
  };
}
