/**
 * The audit log `basalt.admin_audit` (docs/admin-api.md §Audit log): one row per
 * administrative change, written through the same transaction as the change so a
 * change and its row exist together or not at all. Secrets never reach it.
 */
import type { Queryable } from '../../db/engine';

/** Who acted: an administrator through the API, or the command line. */
export interface Actor {
  adminId: string | null;
  email: string | null;
  ip: string | null;
  userAgent: string | null;
  requestId: string | null;
}

export const CLI_ACTOR: Actor = { adminId: null, email: null, ip: null, userAgent: 'basalt cli', requestId: null };

export interface AuditEntry {
  id: string;
  at: Date;
  admin_id: string | null;
  admin_email: string | null;
  ip: string | null;
  user_agent: string | null;
  action: string;
  target: string | null;
  diff: unknown;
  request_id: string | null;
}

export const REDACTED = '[redacted]';
const SECRET_FIELD = /(^|_)(password|secret|token|key_hash|smtp_url|csrf)/i;

/** A copy of `value` with every field whose name says it holds a secret replaced by `[redacted]`. */
export function redact(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redact);
  if (value instanceof Date) return value.toISOString();
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = SECRET_FIELD.test(k) && v !== null && v !== undefined ? REDACTED : redact(v);
    return out;
  }
  return value;
}

/** Write one row; `diff` is redacted here, whatever the caller passed. */
export async function writeAudit(
  q: Queryable,
  actor: Actor,
  action: string,
  target: string | null,
  diff?: unknown,
): Promise<void> {
  await q.query(
    `INSERT INTO basalt.admin_audit (admin_id, admin_email, ip, user_agent, action, target, diff, request_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8)`,
    [
      actor.adminId,
      actor.email,
      actor.ip,
      actor.userAgent?.slice(0, 512) ?? null,
      action,
      target?.slice(0, 500) ?? null,
      diff === undefined ? null : JSON.stringify(redact(diff)),
      actor.requestId,
    ],
  );
}

export interface AuditFilter {
  admin?: string;
  action?: string;
  target?: string;
  since?: Date;
  until?: Date;
  limit?: number;
  /** Cursor: entries older than this id. */
  before?: string;
}

const COLUMNS = 'id::text AS id, at, admin_id, admin_email, ip, user_agent, action, target, diff, request_id';

/**
 * Entries newest first. `admin` matches the e-mail (or the id), `action` an exact
 * action or a prefix ending in `.` (`keys.`), `target` an exact target.
 */
export async function listAudit(
  q: Queryable,
  f: AuditFilter,
): Promise<{ entries: AuditEntry[]; next_cursor: string | null }> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: string, v: unknown) => {
    params.push(v);
    where.push(sql.replaceAll('?', `$${params.length}`));
  };
  if (f.admin) add('(admin_email = lower(?) OR admin_id::text = lower(?))', f.admin);
  if (f.action)
    f.action.endsWith('.')
      ? add("action LIKE ? || '%'", f.action.replace(/[\\%_]/g, '\\$&'))
      : add('action = ?', f.action);
  if (f.target) add('target = ?', f.target);
  if (f.since) add('at >= ?', f.since);
  if (f.until) add('at < ?', f.until);
  if (f.before) add('id < ?::bigint', f.before);
  const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
  params.push(limit + 1);
  const { rows } = await q.query<AuditEntry>(
    `SELECT ${COLUMNS} FROM basalt.admin_audit ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY admin_audit.id DESC LIMIT $${params.length}`,
    params,
  );
  const more = rows.length > limit;
  const entries = more ? rows.slice(0, limit) : rows;
  return { entries, next_cursor: more ? entries[entries.length - 1]!.id : null };
}

/**
 * Delete entries older than `days`, a batch at a time so no statement holds locks on
 * a large table for long. Returns how many went.
 */
export async function pruneAudit(q: Queryable, days: number, batch = 1000): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await q.query(
      `DELETE FROM basalt.admin_audit WHERE id IN (
         SELECT id FROM basalt.admin_audit WHERE at < now() - make_interval(days => $1::int) ORDER BY id LIMIT $2)`,
      [days, batch],
    );
    total += rowCount;
    if (rowCount < batch) return total;
  }
}
