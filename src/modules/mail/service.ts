/**
 * The mail service: validation, rendering, the queue and the SMTP transport behind
 * one object, `p.services.mail`. The HTTP routes, Public Auth (password reset and
 * e-mail verification), extensions and the admin panel all send through it.
 */
import type { Platform } from '../../platform';
import type { Queryable } from '../../db/engine';
import { MailErrors } from './errors';
import type { SendResult } from './model';
import { checkMessage, isValidAddress, type MailMessage, type RenderedMail } from './message';
import { renderMessage, templateStore, type TemplateStore } from './templates';
import { SmtpSendError, SmtpTransport, senderDomain } from './smtp';
import { MailWorker } from './worker';
import { MailRetention } from './retention';
import { acceptJob, insertJob, MAIL_CHANNEL, type NewJob } from './accept';
import { markFailed, markSent } from './leases';
import { freeKey, lookupKey, requestHash, type EarlierAnswer } from './idempotency';
import {
  cancelJob,
  countByState,
  getJob,
  listJobs,
  retryJob,
  searchJobs,
  viewOf,
  type JobFilter,
  type JobRow,
  type JobSearch,
  type JobState,
  type JobView,
} from './jobs';

export type { MailMessage } from './message';
export type { MailTemplate, TemplateInput, TemplateStore } from './templates';
export type { JobView, JobState } from './jobs';

/** The `data` of a send answer: the `MailSendResult` schema of model.ts. */
export type { SendResult };

/** An HTTP send request after schema validation. */
export interface SendRequest extends MailMessage {
  sync?: boolean;
}

export interface MailService {
  /** SMTP URL and sender address are both set (`mail.smtp_url`, `mail.from`). */
  isConfigured(): boolean;
  /**
   * Validate, render and persist a queued job; the worker delivers it with retries.
   * Throws AppError 400 validation_error, 404 template_not_found, 503 mail_not_configured.
   *
   * @example
   * await p.services.mail.enqueue({ to: [user.email], template: 'verify_email',
   *   variables: { app_name, email: user.email, link, token, expires_in_minutes: 60 } });
   */
  enqueue(msg: MailMessage, opts?: { keyId?: string }): Promise<{ jobId: string }>;
  /**
   * Validate, render and hand to SMTP now; resolves once the server accepted it.
   * Throws AppError 502 mail_provider_error, 503 mail_not_configured (and the 400/404 of enqueue).
   */
  sendNow(msg: MailMessage, opts?: { keyId?: string }): Promise<{ jobId: string; messageId: string; response: string }>;
  /** Send a short test message to `to` now (admin panel's "test send"); `response` is the SMTP server's answer. */
  testSend(to: string): Promise<{ jobId: string; messageId: string; response: string }>;
  /** Stored templates (Liquid). */
  templates: TemplateStore;
  jobs: {
    /** A job's state; with `keyId`, only if that key created it. */
    get(id: string, keyId?: string): Promise<JobView | undefined>;
    list(filter?: JobFilter): Promise<{ jobs: JobView[]; total: number }>;
    /** Put a failed or dead job back in the queue with fresh attempts. `tx`: in the caller's transaction (woken at commit). */
    retry(id: string, tx?: Queryable): Promise<boolean>;
    /** Take a queued job out of the queue (state cancelled); false when it is not queued. */
    cancel(id: string, tx?: Queryable): Promise<boolean>;
    /** Whole rows (recipients included) for the admin panel, newest first, with a cursor. */
    search(f: JobSearch): Promise<{ rows: JobRow[]; nextCursor: string | null }>;
    /** One whole row, or undefined. */
    row(id: string): Promise<JobRow | undefined>;
    /** Jobs per state; with `since`, only those created since then. */
    counts(since?: Date): Promise<Record<JobState, number>>;
    /** Delete old finished jobs now (also runs hourly). */
    purge(): Promise<{ jobs: number } | undefined>;
  };
  /**
   * The HTTP send (POST /api/v1/mail/send): the above plus idempotency per API key.
   * `replayed`: the answer is the stored one of an earlier request with the same key.
   */
  submit(
    req: SendRequest,
    ctx: { keyId: string; idempotencyKey?: string },
  ): Promise<{ status: 200 | 202; data: SendResult; replayed: boolean }>;
  /** Start delivering queued jobs, and the hourly purge, in this process (`serve` does, once it listens). */
  startWorker(): Promise<void>;
}

/** Internal knobs (tests): not settings, an operator has no reason to turn them. */
export interface MailServiceOptions {
  /** The worker's fallback poll interval (default 1 s). */
  pollMs?: number;
  /** How long shutdown lets started sends finish before aborting them (default 5 s). */
  shutdownGraceMs?: number;
}

export function createMailService(p: Platform, opts: MailServiceOptions = {}): MailService {
  const smtp = new SmtpTransport(p.settings, p.log);
  const worker = new MailWorker({ db: p.db, settings: p.settings, log: p.log, smtp, ...opts });
  const retention = new MailRetention({ db: p.db, settings: p.settings, log: p.log });
  const templates = templateStore(p.db);
  p.onShutdown(async () => {
    await worker.stop();
    await retention.stop();
    smtp.close();
  });

  // Workers of other instances learn of a new job by NOTIFY at commit. The embedded database
  // belongs to one process (docs/mail.md, "Crashes, restarts, shutdown"), whose worker is
  // woken directly after the commit: a notification there would only reach itself.
  const announce = p.db.kind === 'external' ? MAIL_CHANNEL : undefined;
  const messageIdFor = (jobId: string) => `<${jobId}@${senderDomain(smtp.from())}>`;

  /** 400/404 before anything is stored. */
  async function prepare(msg: MailMessage): Promise<RenderedMail> {
    checkMessage(msg, p.settings.get('mail.max_recipients'));
    const tpl = msg.template !== undefined ? await templates.get(msg.template) : undefined;
    if (msg.template !== undefined && !tpl) throw MailErrors.templateNotFound(msg.template);
    return renderMessage(msg, tpl);
  }

  function requireConfigured() {
    const problem = smtp.problem();
    if (problem) throw MailErrors.notConfigured(problem);
  }

  /** A job for `mail` (`sync`: leased to this instance, sent now; `idempotency`: taking that key). */
  function newJob(
    mail: RenderedMail,
    keyId: string | null,
    sync: boolean,
    idempotency?: NewJob['idempotency'],
  ): NewJob {
    const id = crypto.randomUUID();
    return {
      id,
      keyId,
      mail,
      messageId: messageIdFor(id),
      maxAttempts: sync ? 1 : p.settings.get('mail.max_attempts'),
      sync: sync ? { leaseMs: p.settings.get('mail.lease_ms'), worker: worker.id } : undefined,
      idempotency,
    };
  }

  /**
   * Insert a job: a queued one is announced to the workers of every instance (NOTIFY,
   * delivered at commit). Keyed, it takes its key (idempotency.ts): undefined when the key
   * is now this job's, otherwise the answer of the earlier request that holds it (or 422/409).
   */
  async function record(job: NewJob): Promise<EarlierAnswer | undefined> {
    const channel = job.sync ? undefined : announce;
    // The common case in one statement: the job (with its key) and its NOTIFY.
    if (await acceptJob(p.db, job, channel)) return undefined;
    const { key, hash } = job.idempotency!;
    const scope = job.keyId!;
    const earlier = await lookupKey(p.db, scope, key, hash);
    if (earlier) return earlier;
    // A job has the key but no longer holds it (24 h passed, or its sync send failed or its
    // instance died): take it over in one transaction with the new job. A duplicate doing
    // the same waits on the old job's row until this commits, then finds the key taken.
    return p.db.transaction(async (tx) => {
      await freeKey(tx, scope, key);
      if (await insertJob(tx, job, channel)) return undefined;
      const winner = await lookupKey(tx, scope, key, hash);
      if (winner) return winner;
      throw MailErrors.idempotencyInProgress();
    });
  }

  /** Hand a recorded sync job to the SMTP server now; resolves once the server accepted it. */
  async function deliver(job: NewJob): Promise<{ jobId: string; messageId: string; response: string }> {
    const { id, mail, messageId } = job;
    // Renewed while the server takes its time, so the job is never settled as abandoned
    // mid-send, nor its idempotency key taken over by a duplicate.
    const unhold = worker.holdSync(id);
    try {
      const res = await smtp.send({
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
        messageId,
        headers: { 'X-Basalt-Job-Id': id },
      });
      await markSent(
        p.db,
        id,
        worker.id,
        res.rejected.length ? `the server refused some recipients: ${res.rejected.join(', ')}` : null,
      );
      return { jobId: id, messageId, response: res.response };
    } catch (e) {
      const err = e instanceof SmtpSendError ? e : new SmtpSendError('sending failed', false, e);
      // Dead, so its idempotency key (if any) is free: the client may retry with it.
      await markFailed(p.db, id, worker.id, err.reason, true, 0).catch((e2) =>
        // The job stays leased and is settled as dead once its lease passes (the worker's poll).
        p.log.warn('mail: could not mark a failed synchronous send dead', { job_id: id, cause: e2 }),
      );
      throw MailErrors.provider(err.reason, err.cause);
    } finally {
      unhold();
    }
  }

  const service: MailService = {
    isConfigured: () => smtp.configured(),

    async enqueue(msg, opts = {}) {
      const mail = await prepare(msg);
      requireConfigured();
      const job = newJob(mail, opts.keyId ?? null, false);
      await record(job);
      worker.wake();
      return { jobId: job.id };
    },

    async sendNow(msg, opts = {}) {
      const mail = await prepare(msg);
      requireConfigured();
      // Recorded first, so the send is visible in the job list whatever happens next.
      const job = newJob(mail, opts.keyId ?? null, true);
      await record(job);
      return deliver(job);
    },

    async testSend(to) {
      if (!isValidAddress(to))
        throw MailErrors.invalid(`'${String(to).slice(0, 80)}' is not a valid e-mail address.`, {
          to: 'expected local@domain',
        });
      const app = p.settings.get('app.name');
      return service.sendNow({
        to: [to],
        subject: `${app}: test message`,
        text: `This is a test message from ${app} (Basalt ${p.version}), sent at ${new Date().toISOString()}.\nIf you can read it, outgoing mail works.`,
      });
    },

    templates,

    jobs: {
      async get(id, keyId) {
        const row = await getJob(p.db, id);
        if (!row || (keyId !== undefined && row.key_id !== keyId)) return undefined;
        return viewOf(row);
      },
      list: (filter) => listJobs(p.db, filter),
      retry: async (id, tx) => {
        const ok = await retryJob(tx ?? p.db, id);
        if (ok && tx) {
          // Delivered at commit: every instance's worker (this one's too) looks again then.
          await tx.query('SELECT pg_notify($1, $2)', [MAIL_CHANNEL, '']);
        } else if (ok) {
          worker.wake();
          // Other instances' workers find the job at their next poll anyway.
          await p.db
            .notify(MAIL_CHANNEL, '')
            .catch((e) => p.log.warn('mail: could not wake the other instances', { cause: e }));
        }
        return ok;
      },
      cancel: (id, tx) => cancelJob(tx ?? p.db, id),
      search: (f) => searchJobs(p.db, f),
      row: (id) => getJob(p.db, id),
      counts: (since) => countByState(p.db, since),
      purge: () => retention.purgeNow(),
    },

    async submit(req, { keyId, idempotencyKey }) {
      const sync = req.sync === true;
      const msg: MailMessage = {
        to: req.to,
        subject: req.subject,
        text: req.text,
        html: req.html,
        template: req.template,
        variables: req.variables,
      };
      const replayOf = (a: EarlierAnswer) => ({ ...a, replayed: true });
      // The fingerprint is of the request, not of the rendered mail: a replay gets the
      // original answer even if the template was deleted or mail unconfigured since
      // (docs/mail.md, "Idempotency"). So a request refused by today's checks looks for an
      // earlier answer under its key before the refusal is final; one that passes them finds
      // it when it tries to take the key (no lookup ahead of every first request).
      const hash = idempotencyKey ? requestHash({ ...msg, sync }) : '';
      let mail: RenderedMail;
      try {
        mail = await prepare(msg);
        requireConfigured();
      } catch (e) {
        const earlier = idempotencyKey ? await lookupKey(p.db, keyId, idempotencyKey, hash) : undefined;
        if (earlier) return replayOf(earlier);
        throw e;
      }
      const result = (jobId: string): SendResult => ({ job_id: jobId, sync, recipient_count: mail.to.length });
      const job = newJob(mail, keyId, sync, idempotencyKey ? { key: idempotencyKey, hash } : undefined);
      // Keyed: a key some earlier request holds gets that request's answer (or 422/409).
      const earlier = await record(job);
      if (earlier) return replayOf(earlier);
      if (!sync) {
        worker.wake();
        return { status: 202, data: result(job.id), replayed: false };
      }
      // Sync: the key is held (in flight → 409 for duplicates) while the SMTP server answers;
      // if the server refuses, the job is dead and the key free again.
      await deliver(job);
      return { status: 200, data: result(job.id), replayed: false };
    },

    startWorker: () => {
      retention.start();
      return worker.start();
    },
  };
  return service;
}
