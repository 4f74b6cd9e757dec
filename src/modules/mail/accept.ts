/**
 * Acceptance (docs/mail.md, "The queue"): a new job enters `basalt.mail_jobs`, queued for
 * the workers (and NOTIFY on `basalt_mail` in the same statement, delivered at commit so
 * every instance's worker looks at once) or already `sending`, leased to the request
 * that sends it now (sync).
 */
import type { Queryable } from '../../db/engine';
import type { RenderedMail } from './message';
import { CLAIM_FREE_KEY_SQL, claimParams, type StoredAnswer } from './idempotency';

/** The channel a queued job is announced on; every worker LISTENs to it. */
export const MAIL_CHANNEL = 'basalt_mail';

export interface NewJob {
  id: string;
  keyId: string | null;
  mail: RenderedMail;
  messageId: string;
  maxAttempts: number;
  /** Sync sends are inserted already `sending`, leased to the request that sends them. */
  sync?: { leaseMs: number; worker: string };
}

/** Insert a job; with `notifyChannel`, NOTIFY it in the same statement (delivered at commit). */
export async function insertJob(q: Queryable, j: NewJob, notifyChannel?: string): Promise<void> {
  const insert = `INSERT INTO basalt.mail_jobs (id, key_id, state, sync, recipients, subject, text, html, template, message_id, max_attempts, attempts, lease_until, claimed_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now() + ($13::int * interval '1 millisecond'), $14)`;
  await q.query(notifyChannel ? `WITH job AS (${insert} RETURNING id) SELECT pg_notify($15, '') FROM job` : insert, [
    j.id,
    j.keyId,
    j.sync ? 'sending' : 'queued',
    !!j.sync,
    j.mail.to,
    j.mail.subject,
    j.mail.text ?? null,
    j.mail.html ?? null,
    j.mail.template ?? null,
    j.messageId,
    j.maxAttempts,
    j.sync ? 1 : 0,
    j.sync ? j.sync.leaseMs : null,
    j.sync?.worker ?? null,
    ...(notifyChannel ? [notifyChannel] : []),
  ]);
}

/** The idempotency key an async send takes, with the answer stored for its replays. */
export interface KeyClaim {
  scope: string;
  key: string;
  hash: string;
  lockMs: number;
  answer: StoredAnswer;
}

/**
 * Keyed async acceptance in one statement (one round trip, one commit): take a key that
 * has no record with its answer stored, insert the queued job only if the key was taken,
 * and with `channel`, NOTIFY it. True when the key was this request's and the job is queued. False when
 * the key has a record (nothing was written): the caller reads it to replay or answer
 * 422/409, or takes it over if it expired or its owner died (idempotency.ts, claimKey).
 *
 * The claim and the job commit together, so a crash leaves neither half; a concurrent
 * request with the same key waits on the unique key until this statement commits (then
 * finds the record) or fails (then takes the key itself), as it would in a transaction.
 */
export async function acceptKeyed(
  q: Queryable,
  claim: KeyClaim,
  j: Omit<NewJob, 'sync'>,
  channel?: string,
): Promise<boolean> {
  const { rows } = await q.query(
    `WITH claim AS (${CLAIM_FREE_KEY_SQL}),
     job AS (
       INSERT INTO basalt.mail_jobs (id, key_id, state, recipients, subject, text, html, template, message_id, max_attempts)
       SELECT $8::uuid, $9::text, 'queued', $10::text[], $11::text, $12::text, $13::text, $14::text, $15::text, $16::int FROM claim
       RETURNING id)
     SELECT ${channel ? `pg_notify($17::text, '')` : '1'} FROM job`,
    [
      ...claimParams(claim.scope, claim.key, claim.hash, claim.lockMs, claim.answer),
      j.id,
      j.keyId,
      j.mail.to,
      j.mail.subject,
      j.mail.text ?? null,
      j.mail.html ?? null,
      j.mail.template ?? null,
      j.messageId,
      j.maxAttempts,
      ...(channel ? [channel] : []),
    ],
  );
  return rows.length > 0;
}
