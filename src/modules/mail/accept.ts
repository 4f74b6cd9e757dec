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
}

/** Insert a job; with `notifyChannel`, NOTIFY it in the same statement (delivered at commit). */
export async function insertJob(q: Queryable, j: NewJob, notifyChannel?: string): Promise<void> {
  const insert = `INSERT INTO basalt.mail_jobs (id, key_id, state, sync, recipients, subject, text, html, template, message_id, max_attempts, attempts, lease_until, claimed_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now() + ($13::int * interval '1 millisecond'), $14)`;
  await q.query(
    notifyChannel ? `WITH job AS (${insert} RETURNING id) SELECT pg_notify($15, '') FROM job` : insert,
    [
      j.id, j.keyId, j.sync ? 'sending' : 'queued', !!j.sync, j.mail.to, j.mail.subject, j.mail.text ?? null, j.mail.html ?? null,
      j.mail.template ?? null, j.messageId, j.maxAttempts, j.sync ? 1 : 0, j.sync ? j.sync.leaseMs : null, j.sync?.worker ?? null,
      ...(notifyChannel ? [notifyChannel] : []),
    ],
  );
}
