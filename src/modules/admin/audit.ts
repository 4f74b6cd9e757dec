/**
 * The audit log `basalt.admin_audit` (docs/admin-api.md §Audit log): one row per
 * administrative change, written through the same transaction as the change so a
 * change and its row exist together or not at all. Secrets never reach it.
 */
import { pruneOlderThan } from '../../db/prune';
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import type { Queryable } from '../../db/engine';

/** Who acted: an administrator through the API, or the command line. */
export interface Actor {
  adminId: string | null;
  email: string | null;
  ip: string | null;
  userAgent: string | null;
  requestId: string | null;
  /** 'cli' for the command line; 'admin' (the default) for the panel and the admin API. */
  kind?: 'admin' | 'cli';
  /** The operating-system user who ran the command (command line only). */
  osUser?: string | null;
}

/** The account running this process: who typed a command (beside a serving instance the command runs in it, and only the data dir's owner can reach it). */
function osUser(): string | null {
  let name: string | undefined;
  try {
    name = userInfo().username;
  } catch {}
  // Bun answers 'unknown' where it cannot look the account up: then the environment, then /etc/passwd.
  if (name && name !== 'unknown') return name;
  name = process.env.USER || process.env.LOGNAME;
  if (name) return name;
  const uid = process.getuid?.();
  if (uid === undefined) return null;
  try {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((l) => l.split(':')[2] === String(uid));
    if (line) return line.split(':')[0]!;
  } catch {}
  return `uid ${uid}`;
}

export const CLI_ACTOR: Actor = {
  adminId: null,
  email: null,
  ip: null,
  userAgent: 'basalt cli',
  requestId: null,
  kind: 'cli',
  osUser: osUser(),
};

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
  actor: 'admin' | 'cli';
  os_user: string | null;
  /** What the target is called (an e-mail, a key's display and name), when it is an id. */
  target_label: string | null;
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

/** A readable name for a target from its diff when the caller gave none: an e-mail, else a key's display and name. */
function labelOf(diff: unknown): string | null {
  if (!diff || typeof diff !== 'object' || Array.isArray(diff)) return null;
  const d = diff as Record<string, unknown>;
  if (typeof d.email === 'string') return d.email;
  if (typeof d.display === 'string') return typeof d.name === 'string' && d.name ? `${d.display} ${d.name}` : d.display;
  return null;
}

/** Write one row; `diff` is redacted here, whatever the caller passed. */
export async function writeAudit(
  q: Queryable,
  actor: Actor,
  action: string,
  target: string | null,
  diff?: unknown,
  label?: string | null,
): Promise<void> {
  await q.query(
    `INSERT INTO basalt.admin_audit (admin_id, admin_email, ip, user_agent, action, target, diff, request_id, actor, os_user, target_label)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11)`,
    [
      actor.adminId,
      actor.email,
      actor.ip,
      actor.userAgent?.slice(0, 512) ?? null,
      action,
      target?.slice(0, 500) ?? null,
      diff === undefined ? null : JSON.stringify(redact(diff)),
      actor.requestId,
      actor.kind ?? 'admin',
      actor.kind === 'cli' ? (actor.osUser ?? null) : null,
      (label ?? labelOf(diff))?.slice(0, 500) ?? null,
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

const COLUMNS =
  'id::text AS id, at, admin_id, admin_email, ip, user_agent, action, target, diff, request_id, actor, os_user, target_label';

const likeEscape = (v: string) => v.replace(/[\\%_]/g, '\\$&');

/**
 * Entries newest first. `admin` matches the e-mail (or the id), or `cli` the command
 * line's entries; `action` an exact action or a prefix ending in `.` (`keys.`);
 * `target` an exact target, or part of its name (an e-mail, a key's display), any case.
 */
export async function listAudit(
  q: Queryable,
  f: AuditFilter,
): Promise<{ entries: AuditEntry[]; next_cursor: string | null }> {
  const where: string[] = [];
  const params: unknown[] = [];
  /** The placeholder of a new bind parameter. */
  const bind = (v: unknown) => `$${params.push(v)}`;
  if (f.admin === 'cli') where.push(`actor = ${bind('cli')}`);
  else if (f.admin) {
    const a = bind(f.admin);
    where.push(`(admin_email = lower(${a}) OR admin_id::text = lower(${a}))`);
  }
  if (f.action)
    where.push(
      f.action.endsWith('.') ? `action LIKE ${bind(likeEscape(f.action))} || '%'` : `action = ${bind(f.action)}`,
    );
  if (f.target)
    where.push(`(target = ${bind(f.target)} OR target_label ILIKE '%' || ${bind(likeEscape(f.target))} || '%')`);
  if (f.since) where.push(`at >= ${bind(f.since)}`);
  if (f.until) where.push(`at < ${bind(f.until)}`);
  if (f.before) where.push(`id < ${bind(f.before)}::bigint`);
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
export function pruneAudit(q: Queryable, days: number, batch = 1000): Promise<number> {
  return pruneOlderThan(q, 'basalt.admin_audit', days, batch);
}
