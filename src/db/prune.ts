/**
 * Retention of an append-only platform table with an `id` in time order and an `at`: rows
 * older than `days` deleted a batch at a time, oldest first, so no statement holds locks on a
 * large table for long (the audit log, the request log).
 */
import type { Queryable } from './engine';

/** The tables pruned this way: names from code, never from input. */
export type PrunedTable = 'basalt.admin_audit' | 'basalt.request_log';

/** Delete the rows of `table` older than `days`, `batch` at a time. Returns how many went. */
export async function pruneOlderThan(q: Queryable, table: PrunedTable, days: number, batch: number): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await q.query(
      `DELETE FROM ${table} WHERE id IN (
         SELECT id FROM ${table} WHERE at < now() - make_interval(days => $1::int) ORDER BY id LIMIT $2)`,
      [days, batch],
    );
    total += rowCount;
    if (rowCount < batch) return total;
  }
}
