/**
 * `ctx.mail`: the Mail module's queue and templates, as an extension uses them.
 * Messages go through the same validation, rendering, retries and Message-ID as
 * `POST /api/v1/mail/send`.
 */
import type { MailMessage, MailService, TemplateInput } from '../modules/mail/service';

export interface ExtensionMail {
  /** Whether SMTP and a sender are configured (mail.smtp_url, mail.from). */
  isConfigured(): boolean;
  /**
   * Queue a message; delivered with retries and backoff until the SMTP server accepts it.
   * Throws 400 validation_error, 404 template_not_found, 503 mail_not_configured.
   */
  send(msg: MailMessage): Promise<{ jobId: string }>;
  /** Send now and wait for the SMTP server's answer (502 mail_provider_error when it refuses). */
  sendNow(msg: MailMessage): Promise<{ jobId: string; messageId: string }>;
  /** Create a template (Liquid) if none has that name; never overwrites an operator's edits. */
  ensureTemplate(input: TemplateInput): Promise<boolean>;
}

export function extensionMail(mail: MailService): ExtensionMail {
  return {
    isConfigured: () => mail.isConfigured(),
    send: (msg) => mail.enqueue(msg),
    sendNow: (msg) => mail.sendNow(msg),
    ensureTemplate: (input) => mail.templates.ensure(input),
  };
}
