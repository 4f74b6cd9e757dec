/**
 * Acceptance (docs/mail.md, "The queue"): a new job enters `basalt.mail_jobs`, queued for
 * the workers (and NOTIFY on `basalt_mail` in the same statement, delivered at commit so
 * every instance's worker looks at once) or already `sending`, leased to the request
 * that sends it now (sync).
 */
import type { Db, KnownStatement, Queryable } from '../../db/engine';
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

/** A text array as PostgreSQL reads it: every element quoted. */
function textArray(values: readonly string[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ',';
    out += '"' + values[i]!.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"';
  }
  return out + '}';
}

/**
 * The statement inserting a job; with `notifyChannel`, NOTIFY it in the same statement
 * (delivered at commit). A keyed job is inserted only if no job has its key (one statement,
 * one row: the key, the job and its NOTIFY commit together, so a crash leaves no half). A
 * concurrent request with the same key waits on the unique index until this commits (then
 * it finds the key taken) or fails (then it takes the key itself). Its values are all text,
 * numbers or nulls (the recipients an array literal, `sync` its text), so outside a
 * transaction it runs as a batch of one (`acceptJob`).
 */
export function jobStatement(j: NewJob, notifyChannel?: string): KnownStatement {
  const insert = `INSERT INTO basalt.mail_jobs (id, key_id, state, sync, recipients, subject, text, html, template, message_id, max_attempts, attempts, lease_until, claimed_by, idem_key, idem_hash)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now() + ($13::int * interval '1 millisecond'), $14, $15, $16)
     ${j.idempotency ? 'ON CONFLICT (key_id, idem_key) WHERE idem_key IS NOT NULL DO NOTHING' : ''} RETURNING id`;
  return {
    sql: notifyChannel ? `WITH job AS (${insert}) SELECT pg_notify($17, '') FROM job` : insert,
    params: [
      j.id,
      j.keyId,
      j.sync ? 'sending' : 'queued',
      j.sync ? 'true' : 'false',
      textArray(j.mail.to),
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
  };
}

/**
 * Insert a job (`jobStatement`) on `q`, an open transaction. True when it is in; false when
 * its key is taken: the caller reads the job that has it to replay or answer 422/409, or
 * takes it over if that job no longer holds it (idempotency.ts).
 */
export async function insertJob(q: Queryable, j: NewJob, notifyChannel?: string): Promise<boolean> {
  const st = jobStatement(j, notifyChannel);
  return (await q.query(st.sql, st.params)).rows.length > 0;
}

/**
 * `insertJob` outside a transaction: the statement is its own, as a batch of one (`Db.atOnce`):
 * on external PostgreSQL on the platform pool's wire path (src/db/external-wire.ts), prepared
 * per connection by its text, where the driver parsed and planned its 17 values anew for every
 * request; on the embedded engine as the pool's query runs it.
 */
export async function acceptJob(db: Db, j: NewJob, notifyChannel?: string): Promise<boolean> {
  const [res] = await db.atOnce([jobStatement(j, notifyChannel)]);
  return res!.rows.length > 0;
}
