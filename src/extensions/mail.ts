/**
 * `ctx.mail`: the Mail module's queue and templates, as an extension uses them.
 * Messages go through the same validation, rendering, retries and Message-ID as
 * `POST /api/v1/mail/send`.
 */
import type { Platform } from '../platform';
import { AppError } from '../http/errors';
import type { MailMessage } from '../modules/mail/message';
import type { TemplateInput } from '../modules/mail/templates';

/** The part of the Mail service extensions rely on (src/modules/mail). */
interface MailServiceLike {
  enqueue(msg: MailMessage): Promise<unknown>;
  sendNow(msg: MailMessage): Promise<unknown>;
  templates: { ensure(input: TemplateInput): Promise<boolean> };
}

export interface ExtensionMail {
  /** Queue a message (retried with backoff until the SMTP server accepts it). */
  send(msg: MailMessage): Promise<unknown>;
  /** Send now and wait for the SMTP server's answer (502 mail_provider_error when it refuses). */
  sendNow(msg: MailMessage): Promise<unknown>;
  /** Create a template if it does not exist; never overwrites an operator's edits. */
  ensureTemplate(input: TemplateInput): Promise<boolean>;
}

export function extensionMail(p: Platform, extension: string): ExtensionMail {
  const service = (): MailServiceLike => {
    const mail = (p.services as { mail?: MailServiceLike }).mail;
    if (!mail) throw new AppError(503, 'mail_not_configured', `Mail is not available to extension ${extension}.`);
    return mail;
  };
  return {
    send: (msg) => service().enqueue(msg),
    sendNow: (msg) => service().sendNow(msg),
    ensureTemplate: (input) => service().templates.ensure(input),
  };
}
