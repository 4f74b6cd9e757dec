/** Per-IP submission counter: one atomic upsert per request, the database's clock for everyone. */
import type { ExtensionDb } from 'basalt';

export interface Hit {
  allowed: boolean;
  /** Seconds until the window ends (≥ 1). */
  retryAfter: number;
}

const WINDOW_SECONDS = 3600;

export async function countSubmission(db: ExtensionDb, ip: string, perHour: number): Promise<Hit> {
  const table = db.table('rate_limits');
  const { rows } = await db.query<{ hits: number; retry_after: number }>(
    `INSERT INTO ${table} AS r (ip, window_start, hits) VALUES ($1, now(), 1)
     ON CONFLICT (ip) DO UPDATE SET
       hits = CASE WHEN r.window_start <= now() - make_interval(secs => $2) THEN 1 ELSE r.hits + 1 END,
       window_start = CASE WHEN r.window_start <= now() - make_interval(secs => $2) THEN now() ELSE r.window_start END
     RETURNING hits, greatest(1, ceil(extract(epoch FROM r.window_start + make_interval(secs => $2) - now())))::int AS retry_after`,
    [ip, WINDOW_SECONDS],
  );
  const r = rows[0]!;
  return { allowed: r.hits <= perHour, retryAfter: r.retry_after };
}

/** Forget windows that ended long ago (run hourly). */
export async function purgeOld(db: ExtensionDb): Promise<void> {
  await db.query(`DELETE FROM ${db.table('rate_limits')} WHERE window_start < now() - interval '1 day'`);
}
