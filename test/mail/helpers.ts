/** Small helpers shared by the mail suites. */
import { afterAll, beforeAll } from 'bun:test';
import { freshDb, type Engine, type FreshDb } from '../helpers/engines';
import { startServer, type Reply, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { signInAdmin, type AdminAuth } from '../helpers/admin';
import { startSmtpSink, type SinkMessage, type SmtpSink } from '../helpers/smtp-sink';
import { eventually } from '../helpers/wait';

export const FROM = 'app@example.com';

export function mailEnv(sink: SmtpSink, extra: Record<string, string> = {}): Record<string, string> {
  return { BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: FROM, BASALT_MAIL_RETRY_BASE_MS: '40', ...extra };
}

export interface MailSuite {
  sink: SmtpSink;
  s: TestServer;
  /** A service key with mail:send. */
  key: string;
  /** Signed in when asked for (`admin: true`). */
  a: AdminAuth;
  /** POST /api/v1/mail/send with `k` (default: the suite's key). */
  send(body: unknown, headers?: Record<string, string>, k?: string): Promise<Reply>;
}

/**
 * A describe block's SMTP sink, server with mail configured, service key (mail:send) and,
 * with `admin`, a signed-in administrator: made in beforeAll, stopped in afterAll. `ready`
 * receives them once made (to assign the suite's own variables). Mail is configured in the
 * environment (`env`: more of it), or with `inDatabase` as stored settings, which a test
 * can change (the environment would win).
 */
export function mailSuite(
  engine: Engine,
  opts: { env?: Record<string, string>; inDatabase?: boolean; admin?: boolean } = {},
  ready: (m: MailSuite) => void = () => {},
): MailSuite {
  const m = {
    send: (body: unknown, headers: Record<string, string> = {}, k = m.key) =>
      m.s.req('POST', '/api/v1/mail/send', { body, headers: { 'x-api-key': k, ...headers } }),
  } as MailSuite;
  beforeAll(async () => {
    m.sink = await startSmtpSink();
    if (opts.inDatabase) {
      m.s = await startServer(engine, opts.env ? { env: opts.env } : {});
      await m.s.settings.set('mail.smtp_url', m.sink.url);
      await m.s.settings.set('mail.from', FROM);
      await m.s.settings.set('mail.retry_base_ms', 40);
    } else m.s = await startServer(engine, { env: mailEnv(m.sink, opts.env) });
    m.key = await createKey(m.s, { type: 'service', service: 'shop', permissions: ['mail:send'] });
    if (opts.admin) m.a = await signInAdmin(m.s);
    ready(m);
  });
  afterAll(async () => {
    await m.s?.stop();
    await m.sink?.close();
  });
  return m;
}

/** A fresh database (no server) and an SMTP sink for a describe block, for suites that open the platform themselves. */
export function sinkAndDb(engine: Engine, ready: (db: FreshDb, sink: SmtpSink) => void): void {
  let db: FreshDb | undefined;
  let sink: SmtpSink | undefined;
  beforeAll(async () => {
    db = await freshDb(engine);
    sink = await startSmtpSink();
    ready(db, sink);
  });
  afterAll(async () => {
    await sink?.close();
    await db?.drop();
  });
}

/** Messages the sink received for one job (matched by its stable Message-ID). */
export function arrived(sink: SmtpSink, jobId: string): SinkMessage[] {
  return sink.messages.filter((m) => m.messageId === `<${jobId}@example.com>`);
}

/** The job as its creator sees it over HTTP. */
export async function job(s: TestServer, key: string, id: string) {
  return (await s.req('GET', `/api/v1/mail/jobs/${id}`, { headers: { 'x-api-key': key } })).body.data;
}

export function waitState(s: TestServer, key: string, id: string, state: string, timeoutMs = 10_000) {
  return eventually(() => job(s, key, id), {
    until: (j) => j?.state === state,
    what: `job ${id} to be ${state}`,
    timeout: timeoutMs,
  });
}
