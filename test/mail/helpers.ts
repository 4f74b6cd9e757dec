/** Small helpers shared by the mail suites. */
import type { TestServer } from '../helpers/server';
import type { SinkMessage, SmtpSink } from '../helpers/smtp-sink';

export const FROM = 'app@example.com';

export function mailEnv(sink: SmtpSink, extra: Record<string, string> = {}): Record<string, string> {
  return { BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: FROM, BASALT_MAIL_RETRY_BASE_MS: '40', ...extra };
}

/** Messages the sink received for one job (matched by its stable Message-ID). */
export function arrived(sink: SmtpSink, jobId: string): SinkMessage[] {
  return sink.messages.filter((m) => m.messageId === `<${jobId}@example.com>`);
}

/** Poll until `pred` holds; fails with `what` after `timeoutMs`. */
export async function until<T>(fn: () => Promise<T> | T, pred: (v: T) => boolean, what: string, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (pred(v)) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(v)}`);
    await Bun.sleep(25);
  }
}

/** The job as its creator sees it over HTTP. */
export async function job(s: TestServer, key: string, id: string) {
  return (await s.req('GET', `/api/v1/mail/jobs/${id}`, { headers: { 'x-api-key': key } })).body.data;
}

export function waitState(s: TestServer, key: string, id: string, state: string, timeoutMs = 10_000) {
  return until(() => job(s, key, id), (j) => j?.state === state, `job ${id} to be ${state}`, timeoutMs);
}
