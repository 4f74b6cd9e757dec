/**
 * The dashboard's figures (docs/admin-api.md §Dashboard): health, counts, instances
 * seen (heartbeats, see tasks.ts), failed extensions and the latest audit entries.
 */
import type { Basalt } from '../../services';
import { countAdmins } from './admins';
import { listAudit } from './audit';
import { INSTANCE_SEEN_SECONDS } from './tasks';

async function databaseHealth(p: Basalt): Promise<{ ok: boolean; latency_ms: number | null }> {
  const start = performance.now();
  try {
    await p.db.query('SELECT 1');
    return { ok: true, latency_ms: Math.round((performance.now() - start) * 100) / 100 };
  } catch {
    return { ok: false, latency_ms: null };
  }
}

export async function dashboard(p: Basalt) {
  const database = await databaseHealth(p);
  const instances = (
    await p.db.query<{ id: string; host: string; pid: number; version: string; started_at: Date; seen_at: Date }>(
      `SELECT id, host, pid, version, started_at, seen_at FROM basalt.instances
        WHERE seen_at > now() - make_interval(secs => $1::int) ORDER BY started_at`,
      [INSTANCE_SEEN_SECONDS],
    )
  ).rows;
  const extensions = p.services.extensions.list();
  return {
    version: p.version,
    engine: p.db.kind,
    database,
    mail: {
      configured: p.services.mail.isConfigured(),
      jobs_24h: await p.services.mail.jobs.counts(new Date(Date.now() - 86_400_000)),
    },
    counts: {
      users: await p.services.auth.countUsers(),
      keys_active: await p.services.keys.countActive(),
      admins: await countAdmins(p.db),
    },
    instances,
    extensions: {
      loaded: extensions.filter((e) => e.status === 'loaded').length,
      failed: extensions.filter((e) => e.status === 'failed').map((e) => ({ name: e.name, error: e.error ?? null })),
    },
    // This instance's streams (docs/realtime.md): open now, events sent per second over the last 10 s.
    realtime: {
      connections: p.services.realtime.hub.streams.size,
      events_per_second: p.services.realtime.hub.eventsPerSecond(),
    },
    recent_audit: (await listAudit(p.db, { limit: 10 })).entries,
  };
}
