/** Small helpers shared by the mail suites. */
import type { TestServer } from '../helpers/server';
import type { SinkMessage, SmtpSink } from '../helpers/smtp-sink';
import { eventually } from '../helpers/wait';

export const FROM = 'app@example.com';

export function mailEnv(sink: SmtpSink, extra: Record<string, string> = {}): Record<string, string> {
  return { BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: FROM, BASALT_MAIL_RETRY_BASE_MS: '40', ...extra };
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
