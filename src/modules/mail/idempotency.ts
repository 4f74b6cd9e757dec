/**
 * Idempotency keys (docs/mail.md), enforced by the database: the primary key
 * (key_scope, idem_key) of `basalt.mail_idempotency` decides which request owns a
 * key, with INSERT … ON CONFLICT, so it holds across instances and restarts.
 *
 * A record is `in flight` (status NULL) until the owner stores its answer. A
 * record whose owner died (locked_until passed) or that expired (24 h) may be taken
 * over by the next request with that key.
 */
import type { Queryable } from '../../db/engine';
import { MailErrors } from './errors';
import { UUID } from './jobs';

/** Records are kept this long (docs/mail.md). */
export const IDEMPOTENCY_TTL_HOURS = 24;

/** The owner's stored answer, replayed to later requests with the same key and payload. */
export interface StoredAnswer {
  status: number;
  data: unknown;
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

/** JSON with object keys sorted, so equal payloads hash equal whatever their key order. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return '[' + v.map(canonicalJson).join(',') + ']';
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return (
      '{' +
      Object.keys(o)
        .filter((k) => o[k] !== undefined)
        .sort()
        .map((k) => JSON.stringify(k) + ':' + canonicalJson(o[k]))
        .join(',') +
      '}'
    );
  }
  return JSON.stringify(v ?? null);
}

export function requestHash(payload: unknown): string {
  return new Bun.CryptoHasher('sha256').update(canonicalJson(payload)).digest('hex');
}

/**
 * The live record of a key, if any: its stored answer to replay, or 422 (different
 * payload) / 409 (still in flight). Undefined when the key is free (never used, expired,
 * or its owner died): the caller validates the request and then claims the key.
 */
export async function lookupKey(
  q: Queryable,
  scope: string,
  key: string,
  hash: string,
): Promise<StoredAnswer | undefined> {
  const { rows } = await q.query<{ request_hash: string; status: number | null; response: unknown }>(
    `SELECT request_hash, status, response FROM basalt.mail_idempotency
      WHERE key_scope = $1 AND idem_key = $2 AND expires_at >= now() AND NOT (status IS NULL AND locked_until < now())`,
    [scope, key],
  );
  const rec = rows[0];
  if (!rec) return undefined;
  if (rec.request_hash !== hash) throw MailErrors.idempotencyReused();
  if (rec.status === null) throw MailErrors.idempotencyInProgress();
  return { status: rec.status, data: rec.response };
}

export type ClaimResult = { owned: true } | { owned: false; replay: StoredAnswer };

/**
 * A key's record, parameters $1..$7 of `claimParams`. With an answer, the record is written
 * complete: the caller commits it together with the work it stands for, so nobody ever
 * sees it in flight.
 */
const INSERT_KEY = `INSERT INTO basalt.mail_idempotency AS r (key_scope, idem_key, request_hash, locked_until, expires_at, status, response)
       VALUES ($1, $2, $3, now() + ($4::int * interval '1 millisecond'), now() + ($5::int * interval '1 hour'), $6, $7::jsonb)`;

/** Take a key nobody has used (or whose record is gone): one row when it is now this request's. */
export const CLAIM_FREE_KEY_SQL = `${INSERT_KEY}
       ON CONFLICT (key_scope, idem_key) DO NOTHING
       RETURNING 1`;

/** Take a key: insert its record, or take over one that expired or whose owner died. One row when it is now this request's. */
const CLAIM_KEY_SQL = `${INSERT_KEY}
       ON CONFLICT (key_scope, idem_key) DO UPDATE
         SET request_hash = EXCLUDED.request_hash, status = EXCLUDED.status, response = EXCLUDED.response, created_at = now(),
             locked_until = EXCLUDED.locked_until, expires_at = EXCLUDED.expires_at
         WHERE r.expires_at < now() OR (r.status IS NULL AND r.locked_until < now())
       RETURNING 1`;

export function claimParams(
  scope: string,
  key: string,
  hash: string,
  lockMs: number,
  answer?: StoredAnswer,
): unknown[] {
  return [
    scope,
    key,
    hash,
    lockMs,
    IDEMPOTENCY_TTL_HOURS,
    answer?.status ?? null,
    answer ? JSON.stringify(answer.data) : null,
  ];
}

/**
 * Take the key for this request, or learn what became of the first request with it.
 * Inside a transaction, a concurrent duplicate waits on the unique key until the owner
 * commits (then replays) or rolls back (then takes the key itself).
 * Throws 422 idempotency_key_reused (different payload) or 409
 * idempotency_key_in_progress (the first is still running).
 */
export async function claimKey(
  q: Queryable,
  scope: string,
  key: string,
  hash: string,
  lockMs: number,
  answer?: StoredAnswer,
): Promise<ClaimResult> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const taken = await q.query(CLAIM_KEY_SQL, claimParams(scope, key, hash, lockMs, answer));
    if (taken.rowCount > 0) return { owned: true };
    const { rows } = await q.query<{ request_hash: string; status: number | null; response: unknown }>(
      'SELECT request_hash, status, response FROM basalt.mail_idempotency WHERE key_scope = $1 AND idem_key = $2',
      [scope, key],
    );
    const rec = rows[0];
    if (!rec) continue; // purged between the two statements: try again
    if (rec.request_hash !== hash) throw MailErrors.idempotencyReused();
    if (rec.status === null) throw MailErrors.idempotencyInProgress();
    return { owned: false, replay: { status: rec.status, data: rec.response } };
  }
  throw MailErrors.idempotencyInProgress();
}

/** The idempotency key a sync send holds in flight (renewed with its job's lease). */
export interface HeldKey {
  scope: string;
  key: string;
}

/** Keep in-flight keys locked `lockMs` longer: their owner is alive, still waiting for the server. */
export async function renewKeys(q: Queryable, keys: HeldKey[], lockMs: number): Promise<void> {
  if (!keys.length) return;
  await q.query(
    `UPDATE basalt.mail_idempotency r SET locked_until = now() + ($3::int * interval '1 millisecond')
       FROM unnest($1::text[], $2::uuid[]) AS k(scope, key)
      WHERE r.key_scope = k.scope AND r.idem_key = k.key AND r.status IS NULL`,
    [keys.map((k) => k.scope), keys.map((k) => k.key), lockMs],
  );
}

/** Store the owner's answer; later requests replay it. */
export async function completeKey(q: Queryable, scope: string, key: string, answer: StoredAnswer): Promise<void> {
  await q.query(
    'UPDATE basalt.mail_idempotency SET status = $3, response = $4::jsonb WHERE key_scope = $1 AND idem_key = $2',
    [scope, key, answer.status, JSON.stringify(answer.data)],
  );
}

/** The request failed before anything was sent: free the key so the client may retry with it. */
export async function releaseKey(q: Queryable, scope: string, key: string): Promise<void> {
  await q.query('DELETE FROM basalt.mail_idempotency WHERE key_scope = $1 AND idem_key = $2 AND status IS NULL', [
    scope,
    key,
  ]);
}
