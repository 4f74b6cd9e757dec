/**
 * The SMTP side: one pooled nodemailer transport built from the live settings
 * `mail.smtp_url` and `mail.from`, rebuilt when either changes (admin panel,
 * `basalt settings set`), on every instance.
 */
import nodemailer from 'nodemailer';
import type { Settings } from '../../config/settings';
import type { Logger } from '../../log';
import { isValidAddress } from './message';

/** What the transport is asked to deliver. */
export interface OutgoingMail {
  to: string[];
  subject: string;
  text?: string;
  html?: string;
  /** Stable per job (`<job-id@sender-domain>`), so a resend after a crash is recognisable. */
  messageId: string;
  headers?: Record<string, string>;
  /** Aborting closes the connection carrying the message before the server accepted it (shutdown). */
  signal?: AbortSignal;
}

export interface Delivered {
  messageId: string;
  accepted: string[];
  rejected: string[];
  response: string;
}

/** A delivery that failed. `permanent`: the server refused the message itself (5xx); retrying will not help. */
export class SmtpSendError extends Error {
  constructor(
    /** Safe to show to the API client: the SMTP reply code and class, or the connection problem. */
    readonly reason: string,
    readonly permanent: boolean,
    readonly cause?: unknown,
  ) {
    super(reason);
    this.name = 'SmtpSendError';
  }
}

type Transporter = ReturnType<typeof nodemailer.createTransport>;

const CONNECTION_CODES: Record<string, string> = {
  ECONNECTION: 'could not connect to the mail server',
  ETIMEDOUT: 'the mail server did not answer in time',
  ESOCKET: 'the connection to the mail server failed',
  EDNS: 'the mail server host name does not resolve',
  ETLS: 'TLS with the mail server failed',
  EAUTH: 'the mail server refused the credentials in mail.smtp_url',
  EABORT: 'sending was aborted (the instance is stopping)',
};

/** Turn a nodemailer error into a reason a client may see (no host names, no stack). */
export function classify(e: unknown): SmtpSendError {
  const err = e as { code?: string; responseCode?: number; response?: string; message?: string };
  const code = err?.responseCode;
  if (typeof code === 'number' && code >= 400) {
    const text = (err.response ?? '').replace(/[\r\n]+/g, ' ').slice(0, 200);
    // 5xx to the message or its recipients is final; 5xx to our login is a config problem the operator will fix.
    const permanent = code >= 500 && err.code !== 'EAUTH';
    return new SmtpSendError(
      `the mail server answered ${text || code}${permanent ? ' (permanent)' : ' (temporary)'}`,
      permanent,
      e,
    );
  }
  const known = err?.code ? CONNECTION_CODES[err.code] : undefined;
  return new SmtpSendError(known ?? 'the mail server could not be reached', false, e);
}

/** The address part of `mail.from` (`app@example.com` or `"Name" <app@example.com>`). */
export function senderAddress(from: string): string {
  const m = /<([^<>]+)>\s*$/.exec(from);
  return (m ? m[1]! : from).trim();
}

/** The domain of the sender address, for Message-IDs. */
export function senderDomain(from: string): string {
  const addr = senderAddress(from);
  return addr.includes('@') ? addr.slice(addr.lastIndexOf('@') + 1).toLowerCase() : 'basalt.invalid';
}

export class SmtpTransport {
  private transporter?: Transporter;
  private builtFor = '';
  /** The last `mail.from` checked and what was wrong with it: asked on every send request and every worker wake-up. */
  private fromChecked = { from: '', problem: undefined as string | undefined };
  private readonly stopWatching: () => void;

  constructor(
    private readonly settings: Settings,
    private readonly log: Logger,
  ) {
    this.stopWatching = settings.onChange((keys) => {
      if (keys.some((k) => k === 'mail.smtp_url' || k === 'mail.concurrency')) this.drop('mail settings changed');
    });
  }

  /** Both an SMTP URL and a sender address are set. */
  configured(): boolean {
    return this.problem() === undefined;
  }

  /** Why mail cannot be sent, naming the setting; undefined when it can. */
  problem(): string | undefined {
    if (this.settings.get('mail.smtp_url') === '') return 'mail.smtp_url is empty';
    const from = this.settings.get('mail.from');
    if (from === '') return 'mail.from is empty';
    if (this.fromChecked.from !== from) {
      const problem = isValidAddress(senderAddress(from))
        ? undefined
        : `mail.from '${from.slice(0, 100)}' is not an address (expected app@example.com or "Name" <app@example.com>)`;
      this.fromChecked = { from, problem };
    }
    return this.fromChecked.problem;
  }

  from(): string {
    return this.settings.get('mail.from');
  }

  private current(): Transporter {
    const url = this.settings.get('mail.smtp_url');
    const key = `${url}\n${this.settings.get('mail.concurrency')}`;
    if (!this.transporter || this.builtFor !== key) {
      this.drop('rebuilding');
      this.transporter = nodemailer.createTransport({
        url,
        pool: true,
        maxConnections: this.settings.get('mail.concurrency'),
        maxMessages: 1000,
        connectionTimeout: 10_000,
        greetingTimeout: 10_000,
        socketTimeout: 60_000,
      });
      this.builtFor = key;
    }
    return this.transporter;
  }

  private drop(why: string) {
    if (!this.transporter) return;
    this.log.debug('mail transport closed', { why });
    this.transporter.close();
    this.transporter = undefined;
  }

  /** Hand one message to the SMTP server; resolves once the server accepted it. Throws SmtpSendError. */
  async send(mail: OutgoingMail): Promise<Delivered> {
    try {
      const info = await this.current().sendMail({
        from: this.from(),
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
        messageId: mail.messageId,
        headers: mail.headers,
        signal: mail.signal,
        // Our addresses are validated bare addr-specs; never let nodemailer read files or URLs.
        disableFileAccess: true,
        disableUrlAccess: true,
      });
      return {
        messageId: info.messageId,
        accepted: (info.accepted ?? []).map(String),
        rejected: (info.rejected ?? []).map(String),
        response: String(info.response ?? ''),
      };
    } catch (e) {
      throw classify(e);
    }
  }

  close(): void {
    this.stopWatching();
    this.drop('shutdown');
  }
}
