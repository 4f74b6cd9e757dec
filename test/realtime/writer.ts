/**
 * Rows written as a realtime suite's tables need them: a service key (the owner role,
 * beyond any policy) writing through the Database API, and the changes a stream saw.
 */
import { expectA } from '../helpers/envelopes';
import { createKey } from '../helpers/keys';
import type { TestServer } from '../helpers/server';
import type { SseClient } from './sse';

export type Write = (entity: string, body: Record<string, unknown>) => Promise<any[]>;

/** A service key with db:query on `tables`, and a Database API request with it: its rows. */
export async function serviceWriter(s: TestServer, tables: string[]): Promise<{ key: string; write: Write }> {
  const key = await createKey(s, { type: 'service', service: 'writer', permissions: ['db:query'], tables });
  const write: Write = async (entity, body) =>
    expectA(await s.req('POST', '/api/v1/db/query', { headers: { 'x-api-key': key }, body: { entity, ...body } }), 200)
      .rows as any[];
  return { key, write };
}

/** The changes a stream received, each as [action, the row's body (or its id)]. */
export const changes = (c: SseClient): unknown[][] =>
  c.of().map((e) => [e.data.action, e.data.row.body ?? e.data.row.id]);
