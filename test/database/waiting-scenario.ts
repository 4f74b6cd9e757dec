/**
 * The headline case of docs/database.md "Waiting for the database", over HTTP only, so
 * the same scenario runs against a server in process and against the compiled executable:
 * one key holds an open transaction and queues begins behind it (three whose client gives
 * up after 1 s, three that wait); a second later an administrator's /auth/me, a user's
 * /me and another key's first select must each be answered — or refused with 503
 * `database_busy` and `Retry-After` — within the busy timeout; the begins whose client
 * gave up never start; and revoking the holding key answers in well under a second.
 */
import { expect } from 'bun:test';

/** The bound every request must meet: database.busy_timeout_ms (2 s) plus slack for a loaded machine. */
export const BUSY_MS = 2000;
export const WITHIN_MS = BUSY_MS + 1500;

export interface WaitingTarget {
  /** Main listener (admin API, /metrics) and public listener (auth, Database API). */
  main: string;
  pub: string;
  /** The holding key (id for the revocation, raw key for requests), with db:query on `marks`. */
  holder: { id: string; key: string };
  /** Another key with db:query on `marks`, never presented before (its check is platform work). */
  other: string;
  /** Headers of a signed-in administrator (cookie, CSRF token, Sec-Fetch-Site). */
  admin: Record<string, string>;
  /** Headers of a signed-in site user (Bearer). */
  user: Record<string, string>;
}

export interface Answer {
  status: number;
  code?: string;
  retryAfter: string | null;
  ms: number;
  body: any;
}

async function call(url: string, init: RequestInit): Promise<Answer> {
  const t0 = performance.now();
  const res = await fetch(url, init);
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return {
    status: res.status,
    code: body?.error?.code,
    retryAfter: res.headers.get('retry-after'),
    ms: performance.now() - t0,
    body,
  };
}

const json = (key: string, body: unknown, signal?: AbortSignal): RequestInit => ({
  method: 'POST',
  headers: { 'x-api-key': key, 'content-type': 'application/json' },
  body: JSON.stringify(body),
  signal,
});

export const begin = (t: WaitingTarget, key: string, signal?: AbortSignal) =>
  call(`${t.pub}/api/v1/db/transaction/begin`, json(key, {}, signal));
export const query = (t: WaitingTarget, key: string, body: Record<string, unknown>) =>
  call(`${t.pub}/api/v1/db/query`, json(key, { entity: 'marks', ...body }));
export const commit = (t: WaitingTarget, key: string, id: string) =>
  call(`${t.pub}/api/v1/db/transaction/${id}/commit`, json(key, {}));

/** Answered within the bound: served, or refused 503 database_busy with Retry-After. */
export function expectBounded(a: Answer, what: string): void {
  expect({ what, ms: a.ms < WITHIN_MS }).toEqual({ what, ms: true });
  if (a.status === 503) {
    expect({ what, code: a.code }).toEqual({ what, code: 'database_busy' });
    expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
  }
}

/** The Prometheus counters of /metrics, by name. */
export async function counters(t: WaitingTarget): Promise<Record<string, number>> {
  const text = await (await fetch(`${t.main}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^(basalt_db_[a-z_]+) (\d+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/** What the scenario measured (milliseconds), for the record. */
export interface Measured {
  adminMe: number;
  userMe: number;
  otherSelect: number;
  queuedBegins: string[];
  revoke: number;
}

export async function holdAndQueue(t: WaitingTarget): Promise<Measured> {
  const before = await counters(t);
  // The holder: an open transaction with a row in it.
  const held = await begin(t, t.holder.key);
  expect(held.status).toBe(200);
  const heldId: string = held.body.data.transaction_id;
  expect(
    (await query(t, t.holder.key, { action: 'insert', data: { who: 'held' }, transaction_id: heldId })).status,
  ).toBe(200);

  // Begins queued behind it: three whose client gives up after 1 s, three that wait. A
  // client that gets a transaction inserts a row and commits, as a real one would.
  const gaveUp = [1, 2, 3].map(() =>
    begin(t, t.holder.key, AbortSignal.timeout(1000)).then(
      () => 'answered' as const,
      () => 'gave up' as const,
    ),
  );
  const waiting = [1, 2, 3].map(async (i) => {
    const a = await begin(t, t.holder.key);
    let committed = false;
    if (a.status === 200) {
      const id = a.body.data.transaction_id;
      await query(t, t.holder.key, { action: 'insert', data: { who: `queued-${i}` }, transaction_id: id });
      committed = (await commit(t, t.holder.key, id)).status === 200;
    }
    return { ...a, committed, who: `queued-${i}` };
  });
  expect(await Promise.all(gaveUp)).toEqual(['gave up', 'gave up', 'gave up']);
  await Bun.sleep(200);

  // A second later: the platform's own session checks and another key's first select.
  const [adminMe, userMe, otherSelect] = await Promise.all([
    call(`${t.main}/api/admin/auth/me`, { headers: t.admin }),
    call(`${t.pub}/api/v1/auth/me`, { headers: t.user }),
    query(t, t.other, { action: 'select', limit: 1 }),
  ]);
  expectBounded(adminMe, 'admin /auth/me');
  expectBounded(userMe, 'user /me');
  expectBounded(otherSelect, "another key's select");
  // The platform's session checks do not queue behind API work: served, not refused.
  expect(adminMe.status).toBe(200);
  expect(userMe.status).toBe(200);
  expect(otherSelect.status).toBe(200);

  const queued = await Promise.all(waiting);
  for (const a of queued) {
    expectBounded(a, 'a queued begin');
    expect([200, 503]).toContain(a.status);
  }

  // The begins whose client gave up never started: the only transactions begun are the
  // holder's and those whose client got an answer.
  const after = await counters(t);
  const begun = after.basalt_db_api_transactions_begun_total! - before.basalt_db_api_transactions_begun_total!;
  expect(begun).toBe(1 + queued.filter((a) => a.status === 200).length);
  expect(after.basalt_db_waits_abandoned_total! - before.basalt_db_waits_abandoned_total!).toBeGreaterThanOrEqual(3);

  // The first transaction: still open (external: the key's own begins never take its
  // connection) or already rolled back because it sat idle while others waited (embedded).
  const ended = await call(`${t.pub}/api/v1/db/transaction/${heldId}/rollback`, json(t.holder.key, {}));
  expect([200, 409]).toContain(ended.status);

  // Revoking the holder while it holds a transaction again answers in well under a second.
  const again = await begin(t, t.holder.key);
  expect(again.status).toBe(200);
  const againId: string = again.body.data.transaction_id;
  await query(t, t.holder.key, { action: 'insert', data: { who: 'revoked' }, transaction_id: againId });
  const revoke = await call(`${t.main}/api/admin/keys/${t.holder.id}/revoke`, { method: 'POST', headers: t.admin });
  expect(revoke.status).toBe(200);
  expect(revoke.ms).toBeLessThan(1000);
  expect((await commit(t, t.holder.key, againId)).status).toBe(401);

  // What is committed: only rows of transactions whose client got them and committed.
  const rows = await query(t, t.other, { action: 'select', fields: ['who'], sort: [{ field: 'who' }] });
  expect(rows.status).toBe(200);
  const committed = queued.filter((a) => a.committed).map((a) => a.who);
  expect(rows.body.data.rows.map((r: { who: string }) => r.who)).toEqual(committed);
  return {
    adminMe: Math.round(adminMe.ms),
    userMe: Math.round(userMe.ms),
    otherSelect: Math.round(otherSelect.ms),
    queuedBegins: queued.map((a) => `${a.status} in ${Math.round(a.ms)} ms`),
    revoke: Math.round(revoke.ms),
  };
}
