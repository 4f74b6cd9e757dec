/**
 * Idempotency keys (docs/mail.md, "Idempotency"), enforced by the database: a keyed
 * send's job row carries its key (`idem_key`, scoped by the API key in `key_id`) and the
 * fingerprint of its request (`idem_hash`), and the partial unique index `mail_jobs_idem`
 * decides which request owns a key, with INSERT … ON CONFLICT (accept.ts), so it holds
 * across instances and restarts. One row per keyed send: the job is the record.
 *
 * The answer a replay gets is read off that job: 202 with its id for an async send, 200
 * for a sync send the server accepted. A sync send still `sending` under a live lease is
 * in flight (409 for duplicates). A key is free again once 24 h have passed, or when its
 * sync send failed or its owner died; the next request with it takes it over (freeKey).
 */
import type { Queryable } from '../../db/engine';
import { MailErrors } from './errors';
import { UUID } from './jobs';
import type { SendResult } from './model';

/** A key belongs to its first request this long (docs/mail.md). */
export const IDEMPOTENCY_TTL_HOURS = 24;

/** The first request's answer (read off its job), replayed to later requests with the same key and payload. */
export interface EarlierAnswer {
  status: 200 | 202;
  data: SendResult;
}

/**
 * The key of a request, from the `Idempotency-Key` / `X-Idempotency-Key` header or the
 * body field `idempotency_key`. Must be a UUID; when more than one is given, they must agree.
 */
export function resolveIdempotencyKey(
  headers: { get(name: string): string | null },
  bodyKey: unknown,
): string | undefined {
  const primary = headers.get('idempotency-key') ?? undefined;
  const alias = headers.get('x-idempotency-key') ?? undefined;
  const check = (v: unknown, field: string) => {
    if (typeof v !== 'string' || !UUID.test(v.trim())) {
      throw MailErrors.invalid(`The idempotency key must be a UUID (e.g. ${crypto.randomUUID()}).`, {
        [field]: 'must be a UUID',
      });
    }
    return v.trim().toLowerCase();
  };
  const hp = primary !== undefined ? check(primary, 'Idempotency-Key') : undefined;
  const ha = alias !== undefined ? check(alias, 'X-Idempotency-Key') : undefined;
  if (hp && ha && hp !== ha)
    throw MailErrors.idempotencyConflictingKeys('X-Idempotency-Key', 'the Idempotency-Key header');
  const h = hp ?? ha;
  const b = bodyKey !== undefined && bodyKey !== null ? check(bodyKey, 'idempotency_key') : undefined;
  if (h && b && h !== b)
    throw MailErrors.idempotencyConflictingKeys(
      'idempotency_key',
      hp ? 'the Idempotency-Key header' : 'the X-Idempotency-Key header',
    );
  return h ?? b;
}

/**
 * JSON with object keys sorted, so equal payloads hash equal whatever their key order.
 * Keys whose value is undefined are left out; in arrays undefined is `null` (as in
 * JSON.stringify) and a hole is empty. Built by appending, without the arrays of parts the
 * same text took before (the fingerprint must not change: stored jobs are compared with it).
 */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) {
      if (i > 0) out += ',';
      if (i in v) out += canonicalJson(v[i]);
    }
    return out + ']';
  }
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    let out = '{';
    for (const k of Object.keys(o).sort()) {
      const x = o[k];
      if (x === undefined) continue;
      if (out.length > 1) out += ',';
      out += JSON.stringify(k) + ':' + canonicalJson(x);
    }
    return out + '}';
  }
  return JSON.stringify(v ?? null);
}

export function requestHash(payload: unknown): string {
  return new Bun.CryptoHasher('sha256').update(canonicalJson(payload)).digest('hex');
}

/**
 * While this holds, a job keeps its key ($3: IDEMPOTENCY_TTL_HOURS): an async send for
 * 24 h, a sync send for 24 h once sent and while it is being sent (its lease renewed).
 * A sync send that failed or whose instance died holds it no more.
 */
const HOLDS_KEY = `created_at >= now() - ($3::int * interval '1 hour')
        AND (NOT sync OR state = 'sent' OR (state = 'sending' AND lease_until >= now()))`;

/**
 * What became of the first request with a key: its answer to replay, or 422 (different
 * payload) / 409 (still in flight). Undefined when no job holds the key (never used,
 * expired, or its sync send failed or its owner died).
 */
export async function lookupKey(
  q: Queryable,
  scope: string,
  key: string,
  hash: string,
): Promise<EarlierAnswer | undefined> {
  const { rows } = await q.query<{ id: string; sync: boolean; state: string; n: number; idem_hash: string }>(
    `SELECT id, sync, state, cardinality(recipients) AS n, idem_hash FROM basalt.mail_jobs
      WHERE key_id = $1 AND idem_key = $2 AND ${HOLDS_KEY}`,
    [scope, key, IDEMPOTENCY_TTL_HOURS],
  );
  const job = rows[0];
  if (!job) return undefined;
  if (job.idem_hash !== hash) throw MailErrors.idempotencyReused();
  if (job.sync && job.state !== 'sent') throw MailErrors.idempotencyInProgress();
  const data: SendResult = { job_id: job.id, sync: job.sync, recipient_count: job.n };
  return { status: job.sync ? 200 : 202, data };
}

/**
 * Take a key away from the job that no longer holds it (see HOLDS_KEY), so the next
 * request with it can be inserted. Run in the transaction that inserts that request's
 * job: a concurrent duplicate waits on the row lock, then finds the key taken.
 */
export async function freeKey(q: Queryable, scope: string, key: string): Promise<void> {
  await q.query(
    `UPDATE basalt.mail_jobs SET idem_key = NULL, idem_hash = NULL
      WHERE key_id = $1 AND idem_key = $2 AND NOT coalesce(${HOLDS_KEY}, false)`,
    [scope, key, IDEMPOTENCY_TTL_HOURS],
  );
}
