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
import { acceptKeyed, insertJob, MAIL_CHANNEL } from './accept';
import { markFailed, markSent } from './leases';
import {
  claimKey,
  completeKey,
  lookupKey,
  releaseKey,
  requestHash,
  type HeldKey,
  type StoredAnswer,
} from './idempotency';
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

declare module '../../platform' {
  interface Services {
    mail: MailService;
  }
}

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
    /** Delete old finished jobs and expired idempotency records now (also runs hourly). */
    purge(): Promise<{ jobs: number; idempotency: number } | undefined>;
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
    checkMessage(msg, p.settings.get<number>('mail.max_recipients'));
    const tpl = msg.template !== undefined ? await templates.get(msg.template) : undefined;
    if (msg.template !== undefined && !tpl) throw MailErrors.templateNotFound(msg.template);
    return renderMessage(msg, tpl);
  }

  function requireConfigured() {
    const problem = smtp.problem();
    if (problem) throw MailErrors.notConfigured(problem);
  }

  /** Insert a queued job and NOTIFY the workers of every instance (delivered at commit). */
  async function queue(
    mail: RenderedMail,
    keyId: string | null,
    tx: Queryable = p.db,
    id: string = crypto.randomUUID(),
  ): Promise<string> {
    await insertJob(
      tx,
      { id, keyId, mail, messageId: messageIdFor(id), maxAttempts: p.settings.get<number>('mail.max_attempts') },
      announce,
    );
    return id;
  }

  /** `heldKey`: the idempotency key this send holds in flight (kept locked while the server answers). */
  async function deliverNow(
    mail: RenderedMail,
    keyId: string | null,
    heldKey?: HeldKey,
  ): Promise<{ jobId: string; messageId: string; response: string }> {
    const id = crypto.randomUUID();
    const messageId = messageIdFor(id);
    // Recorded first, so the send is visible in the job list whatever happens next.
    await insertJob(p.db, {
      id,
      keyId,
      mail,
      messageId,
      maxAttempts: 1,
      sync: { leaseMs: p.settings.get<number>('mail.lease_ms'), worker: worker.id },
    });
    // Renewed while the server takes its time, so the job is never settled as abandoned mid-send.
    const unhold = worker.holdSync(id, heldKey);
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
      await markFailed(p.db, id, worker.id, err.reason, true, 0).catch(() => {});
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
      const jobId = await queue(mail, opts.keyId ?? null);
      worker.wake();
      return { jobId };
    },

    async sendNow(msg, opts = {}) {
      const mail = await prepare(msg);
      requireConfigured();
      return deliverNow(mail, opts.keyId ?? null);
    },

    async testSend(to) {
      if (!isValidAddress(to))
        throw MailErrors.invalid(`'${String(to).slice(0, 80)}' is not a valid e-mail address.`, {
          to: 'expected local@domain',
        });
      const app = p.settings.get<string>('app.name');
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
          await p.db.notify(MAIL_CHANNEL, '').catch(() => {});
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
      const replayOf = (a: StoredAnswer) => ({
        status: a.status as 200 | 202,
        data: a.data as SendResult,
        replayed: true,
      });
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

      if (!idempotencyKey) {
        if (sync) return { status: 200, data: result((await deliverNow(mail, keyId)).jobId), replayed: false };
        const jobId = await queue(mail, keyId);
        worker.wake();
        return { status: 202, data: result(jobId), replayed: false };
      }

      if (!sync) {
        const jobId = crypto.randomUUID();
        const data = result(jobId);
        const lockMs = p.settings.get<number>('mail.lease_ms');
        // The common case in one statement: take the key with its answer, queue the job, NOTIFY.
        const job = {
          id: jobId,
          keyId,
          mail,
          messageId: messageIdFor(jobId),
          maxAttempts: p.settings.get<number>('mail.max_attempts'),
        };
        if (
          await acceptKeyed(
            p.db,
            { scope: keyId, key: idempotencyKey, hash, lockMs, answer: { status: 202, data } },
            job,
            announce,
          )
        ) {
          worker.wake();
          return { status: 202, data, replayed: false };
        }
        // The key has a record. A live one: replay it, or 422 (other payload) / 409 (in flight).
        const earlier = await lookupKey(p.db, keyId, idempotencyKey, hash);
        if (earlier) return replayOf(earlier);
        // One that expired, or whose sync owner died: take it over in a transaction with the
        // job; a duplicate waits on the unique key until this commits, then replays; a crash
        // leaves neither half.
        const out = await p.db.transaction(async (tx) => {
          const claim = await claimKey(tx, keyId, idempotencyKey, hash, lockMs, { status: 202, data });
          if (!claim.owned) return replayOf(claim.replay);
          await queue(mail, keyId, tx, jobId);
          return { status: 202 as const, data, replayed: false };
        });
        if (!out.replayed) worker.wake();
        return out;
      }

      // Sync: the key is held (in flight → 409 for duplicates) while the SMTP server answers.
      const claim = await claimKey(p.db, keyId, idempotencyKey, hash, p.settings.get<number>('mail.lease_ms'));
      if (!claim.owned) return replayOf(claim.replay);
      let data: SendResult;
      try {
        data = result((await deliverNow(mail, keyId, { scope: keyId, key: idempotencyKey })).jobId);
      } catch (e) {
        // Nothing was accepted by the server: the client may retry with the same key.
        await releaseKey(p.db, keyId, idempotencyKey).catch(() => {});
        throw e;
      }
      await completeKey(p.db, keyId, idempotencyKey, { status: 200, data });
      return { status: 200, data, replayed: false };
    },

    startWorker: () => {
      retention.start();
      return worker.start();
    },
  };
  return service;
}
