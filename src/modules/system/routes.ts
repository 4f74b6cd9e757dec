import { statfsSync } from 'node:fs';
import { Elysia } from 'elysia';
import { DiskFullError } from '../../db/engine';
import type { Basalt } from '../../services';
import { Errors } from '../../http/errors';
import { metricsFor } from '../../http/metrics';
import { requestInfo } from '../../http/request-info';
import { withTimeout } from '../../util/timeout';
import type { WaitStats } from '../../db/engine';

/**
 * Waiting for the database (src/db/wait-gate.ts), the platform's pool and, on external
 * PostgreSQL, the Database API's own: docs/operations.md "Waiting for the database".
 */
function withWaitCounters(
  p: Basalt,
  more: { gauges?: Record<string, number>; counters?: Record<string, number> },
): { gauges?: Record<string, number>; counters?: Record<string, number> } {
  const api = p.services.database?.waitStats();
  const sum = (k: keyof WaitStats) => p.db.waits[k] + (api?.[k] ?? 0);
  const counters = {
    basalt_db_waits_total: sum('waited'),
    basalt_db_waits_refused_total: sum('refused'),
    basalt_db_waits_abandoned_total: sum('abandoned'),
    basalt_db_transactions_preempted_total: sum('preempted'),
    basalt_db_api_transactions_begun_total: p.services.database?.transactions.begun ?? 0,
  };
  return { ...more, counters: { ...more.counters, ...counters } };
}

/** The request log's buffer (docs/logs.md): rows written and dropped, and the rows waiting. */
function withRequestLog(
  p: Basalt,
  more: { gauges?: Record<string, number>; counters?: Record<string, number> },
): { gauges?: Record<string, number>; counters?: Record<string, number> } {
  const c = p.services.logs.counts();
  return {
    gauges: { ...more.gauges, basalt_request_log_buffered: c.buffered },
    counters: {
      ...more.counters,
      basalt_request_log_written_total: c.written,
      basalt_request_log_dropped_total: c.dropped,
    },
  };
}

/** 127.0.0.0/8 and ::1 (addresses arrive normalized: `::ffff:127.0.0.1` is `127.0.0.1`). */
const isLoopback = (ip: string) => ip === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(ip);

/** After a disk-full error, readiness reports it this long (a write could tell, but readiness must not write). */
const DISK_FULL_REPORT_MS = 30_000;
/** One WAL segment: below this much free space the embedded engine's next segment cannot be created. */
const WAL_SEGMENT_BYTES = 16 * 1024 * 1024;

/** A disk-full error was seen lately, or the embedded engine's disk has not room for a WAL segment. */
function diskFull(p: Basalt): boolean {
  if (Date.now() - DiskFullError.lastAt < DISK_FULL_REPORT_MS) return true;
  if (p.db.kind !== 'embedded') return false;
  try {
    const s = statfsSync(p.dataDir);
    return s.bavail * s.bsize < WAL_SEGMENT_BYTES;
  } catch {
    return false;
  }
}

/** Liveness, readiness and metrics (main listener). */
export function systemRoutes(p: Basalt) {
  return new Elysia({ name: 'basalt.system' })
    .get('/healthz', () => ({ success: true, data: { status: 'ok', version: p.version } }), { detail: { hide: true } })
    .get(
      '/readyz',
      async () => {
        if (diskFull(p)) throw Errors.diskFull();
        // The embedded engine runs in this process: while an open transaction holds it
        // (up to db.transaction_idle_timeout_ms), SELECT 1 would only queue behind it, and
        // reporting that as an outage would take a healthy instance out of rotation.
        if (p.db.busy) return { success: true, data: { status: 'ready', database: p.db.kind, busy: true } };
        try {
          await withTimeout(p.db.query('SELECT 1'), 2000);
        } catch (e) {
          throw Errors.databaseUnavailable(e);
        }
        return { success: true, data: { status: 'ready', database: p.db.kind } };
      },
      { detail: { hide: true } },
    )
    .get(
      '/metrics',
      async ({ request }) => {
        // Request counts and memory tell an outsider about traffic: by default only this
        // machine reads them (docs/operations.md, Metrics).
        const access = p.settings.get('web.metrics_access');
        if (access === 'off') throw Errors.notFound();
        if (access === 'loopback' && !isLoopback(requestInfo(request).ip)) throw Errors.metricsLoopbackOnly();
        return new Response(
          metricsFor(p).render(
            { basalt_database_external: p.db.kind === 'external' ? 1 : 0 },
            withWaitCounters(p, withRequestLog(p, p.services.realtime.metrics())),
          ) + (await p.services.jobs.metrics()),
          { headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' } },
        );
      },
      { detail: { hide: true } },
    );
}
