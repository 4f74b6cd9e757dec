/**
 * Reading and pruning the request log (basalt.request_log, docs/logs.md): the admin API,
 * the panel's Logs screen and `basalt logs` go through these, by way of the service.
 */
import type { Queryable } from '../../db/engine';
import { isUuid } from '../../util/uuid';
import { pruneOlderThan } from '../../db/prune';

export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx', 'error'] as const;
export type StatusClass = (typeof STATUS_CLASSES)[number];

export interface LogFilter {
  since?: Date;
  until?: Date;
  /** `2xx` … `5xx`, or `error`: status 400 and above. */
  status?: StatusClass;
  area?: string;
  /** The path starts with this (the query string included in the match). */
  path?: string;
  /** A key's id, or its name. */
  key?: string;
  /** A user's id, or e-mail. */
  user?: string;
  requestId?: string;
}

export interface LogEntry {
  id: string;
  at: Date;
  request_id: string;
  method: string;
  path: string;
  status: number;
  duration_ms: number;
  area: string;
  key_id: string | null;
  /** The key's name, or its prefix…last4 when it has none. */
  key_label: string | null;
  user_id: string | null;
  user_email: string | null;
  ip: string | null;
  error: { code: string; message: string; cause?: { name?: string; message: string; stack?: string } } | null;
}

/** The WHERE clause of `f` on alias `l`, its values pushed to `params`. */
function where(f: LogFilter, params: unknown[]): string {
  const c: string[] = [];
  const p = (v: unknown) => `$${params.push(v)}`;
  if (f.since) c.push(`l.at >= ${p(f.since)}`);
  if (f.until) c.push(`l.at < ${p(f.until)}`);
  if (f.status === 'error') c.push('l.status >= 400');
  else if (f.status) {
    const lo = Number(f.status[0]) * 100;
    c.push(`l.status >= ${p(lo)} AND l.status < ${p(lo + 100)}`);
  }
  if (f.area) c.push(`l.area = ${p(f.area)}`);
  if (f.path) c.push(`left(l.path, ${p(f.path.length)}) = ${p(f.path)}`);
  if (f.key) {
    if (isUuid(f.key)) c.push(`l.key_id = ${p(f.key)}`);
    else c.push(`l.key_id IN (SELECT id FROM basalt.api_keys WHERE name = ${p(f.key)} OR prefix = ${p(f.key)})`);
  }
  if (f.user) {
    if (isUuid(f.user)) c.push(`l.user_id = ${p(f.user)}`);
    else c.push(`l.user_id IN (SELECT id FROM basalt.users WHERE email = lower(btrim(${p(f.user)})))`);
  }
  if (f.requestId) c.push(`l.request_id = ${p(f.requestId)}`);
  return c.length ? `WHERE ${c.join(' AND ')}` : '';
}

const COLUMNS = `l.id::text AS id, l.at, l.request_id, l.method, l.path, l.status::int AS status,
  round(l.duration_ms::numeric, 1)::float8 AS duration_ms, l.area, l.key_id::text AS key_id,
  coalesce(k.name, k.prefix || '…' || k.last4) AS key_label, l.user_id::text AS user_id,
  u.email AS user_email, l.ip, l.error
  FROM basalt.request_log l
  LEFT JOIN basalt.api_keys k ON k.id = l.key_id
  LEFT JOIN basalt.users u ON u.id = l.user_id`;

/** Newest first, `limit` at a time; `before`: the last id of the previous page. */
export async function searchLog(
  q: Queryable,
  f: LogFilter & { limit?: number; before?: string },
): Promise<{ entries: LogEntry[]; next_cursor: string | null }> {
  const params: unknown[] = [];
  let w = where(f, params);
  if (f.before) w += `${w ? ' AND' : 'WHERE'} l.id < $${params.push(f.before)}::bigint`;
  const limit = f.limit ?? 50;
  const { rows } = await q.query<LogEntry>(
    `SELECT ${COLUMNS} ${w} ORDER BY l.id DESC LIMIT $${params.push(limit + 1)}`,
    params,
  );
  const more = rows.length > limit;
  const entries = more ? rows.slice(0, limit) : rows;
  return { entries, next_cursor: more ? entries[entries.length - 1]!.id : null };
}

/** Every row of one request id (a client may send the same X-Request-Id twice), oldest first. */
export async function entriesOf(q: Queryable, requestId: string): Promise<LogEntry[]> {
  const { rows } = await q.query<LogEntry>(`SELECT ${COLUMNS} WHERE l.request_id = $1 ORDER BY l.id LIMIT 20`, [
    requestId,
  ]);
  return rows;
}

/** What administrators changed in that request (basalt.admin_audit carries the request id too). */
export async function auditOf(
  q: Queryable,
  requestId: string,
): Promise<{ id: string; at: Date; action: string; target: string | null; admin_email: string | null }[]> {
  const { rows } = await q.query<{
    id: string;
    at: Date;
    action: string;
    target: string | null;
    admin_email: string | null;
  }>(
    `SELECT id::text AS id, at, action, coalesce(target_label, target) AS target, admin_email
       FROM basalt.admin_audit WHERE request_id = $1 ORDER BY id LIMIT 50`,
    [requestId],
  );
  return rows;
}

export interface MinuteCount {
  minute: Date;
  /** Requests answered: the rows kept, each counted for the requests it stands for (its weight). */
  requests: number;
  errors: number;
  /** Rows kept: fewer than `requests` where successes were sampled. */
  kept: number;
}

/** Requests (estimated where sampled) and errors (status 400 and above, all kept) per minute of [since, until), minutes without any left out. */
export async function perMinute(q: Queryable, f: LogFilter & { since: Date; until: Date }): Promise<MinuteCount[]> {
  const params: unknown[] = [];
  const { rows } = await q.query<MinuteCount>(
    `SELECT date_trunc('minute', l.at) AS minute, round(sum(l.weight))::int AS requests,
            (count(*) FILTER (WHERE l.status >= 400))::int AS errors, count(*)::int AS kept
       FROM basalt.request_log l ${where(f, params)} GROUP BY 1 ORDER BY 1`,
    params,
  );
  return rows;
}

/** Delete rows older than `days`, a batch at a time (oldest ids first). Returns how many went. */
export function pruneLog(q: Queryable, days: number, batch = 5000): Promise<number> {
  return pruneOlderThan(q, 'basalt.request_log', days, batch);
}
