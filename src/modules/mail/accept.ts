/**
 * Acceptance (docs/mail.md, "The queue"): a new job enters `basalt.mail_jobs`, queued for
 * the workers (and NOTIFY on `basalt_mail` in the same statement, delivered at commit so
 * every instance's worker looks at once) or already `sending`, leased to the request
 * that sends it now (sync).
 */
import type { Queryable } from '../../db/engine';
import type { RenderedMail } from './message';

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
  /**
   * The idempotency key the job takes (scoped by `keyId`) and its request's fingerprint
   * (idempotency.ts): the job is the key's record.
   */
  idempotency?: { key: string; hash: string };
}

/**
 * Insert a job; with `notifyChannel`, NOTIFY it in the same statement (delivered at commit).
 * True when it is in. A keyed job is inserted only if no job has its key (one statement,
 * one row: the key, the job and its NOTIFY commit together, so a crash leaves no half). A
 * concurrent request with the same key waits on the unique index until this commits (then
 * it finds the key taken) or fails (then it takes the key itself). False when the key is
 * taken: the caller reads the job that has it to replay or answer 422/409, or takes it
 * over if that job no longer holds it (idempotency.ts).
 */
export async function insertJob(q: Queryable, j: NewJob, notifyChannel?: string): Promise<boolean> {
  const insert = `INSERT INTO basalt.mail_jobs (id, key_id, state, sync, recipients, subject, text, html, template, message_id, max_attempts, attempts, lease_until, claimed_by, idem_key, idem_hash)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now() + ($13::int * interval '1 millisecond'), $14, $15, $16)
     ${j.idempotency ? 'ON CONFLICT (key_id, idem_key) WHERE idem_key IS NOT NULL DO NOTHING' : ''} RETURNING id`;
  const { rows } = await q.query(
    notifyChannel ? `WITH job AS (${insert}) SELECT pg_notify($17, '') FROM job` : insert,
    [
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
      j.idempotency?.key ?? null,
      j.idempotency?.hash ?? null,
      ...(notifyChannel ? [notifyChannel] : []),
    ],
  );
  return rows.length > 0;
}
