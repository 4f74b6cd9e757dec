/**
 * The outbox in SQL (src/db/migrations/110_realtime.sql, docs/realtime.md): events after an
 * id, the retention prune and its high-water mark, which tables emit changes. No HTTP here.
 */
import { AnswerTooLargeError, type Db, type Queryable } from '../../db/engine';

/** The NOTIFY channel the commit-time stamp trigger signals on. */
export const REALTIME_CHANNEL = 'basalt_realtime';

/** One stamped outbox row: a row change or an extension's message. */
export interface OutboxEvent {
  id: number;
  /** Row change: schema, table, action, primary key object (canonical jsonb text, as the trigger wrote it). */
  schema: string | null;
  table: string | null;
  action: 'insert' | 'update' | 'delete' | null;
  pk: string | null;
  /** The row after an insert or update and before an update, as JSON text (to_jsonb of the row). */
  newRow: string | null;
  oldRow: string | null;
  /** Extension message: channel, payload (JSON text), audience (user ids; null = every subscriber). */
  channel: string | null;
  payload: string | null;
  audience: string[] | null;
}

interface Row {
  id: string;
  rel_schema: string | null;
  rel_name: string | null;
  action: OutboxEvent['action'];
  pk: string | null;
  new_row: string | null;
  old_row: string | null;
  channel: string | null;
  payload: string | null;
  audience: string[] | string | null;
}

/**
 * The most bytes of rows one page of events may hold (the row images of 1 MB rows, say): past
 * it the page is read again an eighth as long, down to a single event, which is never refused.
 * So the hub holds at most about this much of the outbox at once, whatever the rows' size.
 */
export const PAGE_BYTES = 16 * 1024 * 1024;

const EVENTS_AFTER = `SELECT id, rel_schema, rel_name, action, pk::text AS pk, new_row::text AS new_row, old_row::text AS old_row, channel, payload::text AS payload, audience::text[] AS audience
       FROM basalt.realtime_outbox WHERE id > $1 ORDER BY id LIMIT $2`;

/**
 * Events with id > `after`, in id (commit) order, at most `limit`, and at most `maxBytes`
 * (PAGE_BYTES) of rows unless a single event is larger. `more`: the page was full, so more may follow at once.
 */
export async function eventsAfter(
  db: Pick<Db, 'atOnce'>,
  after: number,
  limit: number,
  maxBytes = PAGE_BYTES,
): Promise<{ events: OutboxEvent[]; more: boolean }> {
  for (let n = limit; ; n = Math.max(1, Math.floor(n / 8))) {
    let rows: Row[];
    try {
      const bound = n > 1 ? { maxAnswerBytes: maxBytes } : {};
      rows = (await db.atOnce([{ sql: EVENTS_AFTER, params: [after, n] }], bound))[0]!.rows as unknown as Row[];
    } catch (e) {
      if (e instanceof AnswerTooLargeError && n > 1) continue;
      throw e;
    }
    return { events: rows.map(eventOf), more: rows.length === n };
  }
}

function eventOf(r: Row): OutboxEvent {
  return {
    id: Number(r.id),
    schema: r.rel_schema,
    table: r.rel_name,
    action: r.action,
    pk: r.pk,
    newRow: r.new_row,
    oldRow: r.old_row,
    channel: r.channel,
    payload: r.payload,
    audience: typeof r.audience === 'string' ? parseUuidArray(r.audience) : r.audience,
  };
}

function parseUuidArray(text: string): string[] {
  return text
    .replace(/^\{|\}$/g, '')
    .split(',')
    .filter(Boolean);
}

/** The newest stamped id (0 when none) and the highest id retention has pruned. */
export async function outboxHead(q: Queryable): Promise<{ head: number; prunedThrough: number }> {
  const { rows } = await q.query<{ head: string | null; pruned: string }>(
    `SELECT (SELECT max(id) FROM basalt.realtime_outbox) AS head,
            (SELECT pruned_through FROM basalt.realtime_state) AS pruned`,
  );
  const prunedThrough = Number(rows[0]?.pruned ?? 0);
  return { head: Math.max(Number(rows[0]?.head ?? 0), prunedThrough), prunedThrough };
}

/**
 * Delete up to `batch` events older than `retentionSeconds` and raise the pruned mark to
 * the highest id deleted, in one statement. Returns how many went; callers repeat while a
 * whole batch went. Rows never stamped (their stamp trigger was disabled, e.g. by
 * session_replication_role = replica) go too once twice as old. Events a hook has not yet
 * handled stay (docs/extensions.md, "Hooks"), unless its extension has not started for 7 days;
 * events of other tables and channels go whatever the hooks' checkpoints.
 */
/**
 * Whether outbox event `o` is of the source of hook checkpoint `h` (`table:<schema>.<name>` or
 * `event:<type>`, src/modules/jobs/hooks.ts): a SQL condition on those two aliases.
 */
export const HOOK_SOURCE_MATCH = `CASE WHEN h.source LIKE 'event:%' THEN o.channel = '$platform:' || substr(h.source, 7)
  ELSE o.rel_schema || '.' || o.rel_name = substr(h.source, 7) END`;

export async function pruneOutbox(q: Queryable, retentionSeconds: number, batch: number): Promise<number> {
  const { rows } = await q.query<{ n: string }>(
    `WITH gone AS (
       DELETE FROM basalt.realtime_outbox WHERE seq IN (
         SELECT seq FROM basalt.realtime_outbox o
          WHERE created_at < now() - make_interval(secs => $1)
            AND (id IS NOT NULL OR created_at < now() - make_interval(secs => 2 * $1))
            AND NOT EXISTS (SELECT 1 FROM basalt.hook_checkpoints h
                             WHERE h.seen_at > now() - interval '7 days' AND o.id > h.position
                               AND ${HOOK_SOURCE_MATCH})
          ORDER BY seq LIMIT $2)
       RETURNING id),
     mark AS (
       UPDATE basalt.realtime_state SET pruned_through = greatest(pruned_through, (SELECT max(id) FROM gone))
        WHERE (SELECT max(id) FROM gone) IS NOT NULL)
     SELECT count(*) AS n FROM gone`,
    [retentionSeconds, batch],
  );
  return Number(rows[0]?.n ?? 0);
}

/** Tables of `schema` that emit changes (carry the basalt_realtime trigger). */
export async function enabledTables(q: Queryable, schema: string): Promise<Set<string>> {
  const { rows } = await q.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_catalog.pg_trigger g
       JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE g.tgname = 'basalt_realtime' AND n.nspname = $1`,
    [schema],
  );
  return new Set(rows.map((r) => r.name));
}

/** Publish an extension's message on `channel` (inside `q`'s transaction when it is one). */
export async function publishMessage(
  q: Queryable,
  channel: string,
  payload: unknown,
  audience: string[] | null,
): Promise<void> {
  await q.query(
    'INSERT INTO basalt.realtime_outbox (channel, payload, audience) VALUES ($1, $2::jsonb, $3::text::uuid[])',
    [channel, JSON.stringify(payload ?? null), audience ? `{${audience.join(',')}}` : null],
  );
}
