/**
 * Mail API throughput, as ratios against a floor measured in the same run:
 * nodemailer sending straight to the same local SMTP sink in a loop, with the
 * same number of pooled connections the queue worker uses.
 *
 *  - accepted: POST /api/v1/mail/send (async, each with its own Idempotency-Key)
 *    answered 202, i.e. validated, rendered, job row (with its key) committed.
 *  - delivered: messages the sink received per second through the whole pipeline,
 *    from the first request to the last delivery (HTTP load competing).
 *  - drain: the worker alone emptying a queue of jobs already committed (claim with
 *    SKIP LOCKED, send, mark sent), from the moment mail is configured.
 *
 * Traffic goes to 127.0.0.1 only and is bounded in count.
 *
 *   bun bench/mail.ts                  # embedded engine
 *   BASALT_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun bench/mail.ts   # both engines
 */
import nodemailer from 'nodemailer';
import { ENGINES } from '../test/helpers/engines';
import { startServer } from '../test/helpers/server';
import { startSmtpSink } from '../test/helpers/smtp-sink';
import { insertJob } from '../src/modules/mail/accept';
import { fmt } from './support';

const MAILS = Number(process.env.BENCH_MAILS ?? 1500);
const HTTP_CONCURRENCY = 16;
const SMTP_CONNECTIONS = 8;
const FROM = 'bench@example.com';
const message = (i: number) => ({
  to: [`user${i}@example.com`],
  subject: `Order ${i} shipped`,
  text: `Hello, order ${i} is on its way.`,
  html: `<p>Hello, order <b>${i}</b> is on its way.</p>`,
});

/** The floor: nodemailer alone, pooled, `count` messages with SMTP_CONNECTIONS in flight. */
async function direct(url: string, count: number): Promise<number> {
  const t = nodemailer.createTransport({
    url,
    pool: true,
    maxConnections: SMTP_CONNECTIONS,
    maxMessages: 1000,
  } as never);
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: SMTP_CONNECTIONS }, async () => {
      while (next < count) {
        const i = next++;
        await t.sendMail({ from: FROM, ...message(i), messageId: `<direct-${i}@example.com>` });
      }
    }),
  );
  const perSecond = count / ((performance.now() - start) / 1000);
  t.close();
  return perSecond;
}

const rows: string[][] = [];
for (const engine of ENGINES) {
  const sink = await startSmtpSink();
  const s = await startServer(engine, {
    env: { BASALT_MAIL_FROM: FROM, BASALT_MAIL_CONCURRENCY: String(SMTP_CONNECTIONS) },
  });
  await s.platform.settings.set('mail.smtp_url', sink.url);
  try {
    const key = (
      await s.platform.services.keys.create({ type: 'service', service: 'bench', permissions: ['mail:send'] })
    ).key;
    await direct(sink.url, 200); // warm-up
    sink.clear();
    const floor = await direct(sink.url, MAILS);
    sink.clear();

    let next = 0;
    const start = performance.now();
    let acceptedAt = 0;
    await Promise.all(
      Array.from({ length: HTTP_CONCURRENCY }, async () => {
        while (next < MAILS) {
          const i = next++;
          const r = await fetch(`${s.url}/api/v1/mail/send`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': key, 'idempotency-key': crypto.randomUUID() },
            body: JSON.stringify(message(i)),
          });
          await r.arrayBuffer();
          if (r.status !== 202) throw new Error(`unexpected status ${r.status}`);
        }
      }),
    );
    acceptedAt = performance.now();
    await sink.waitFor(MAILS, 120_000);
    const deliveredAt = performance.now();
    const accepted = MAILS / ((acceptedAt - start) / 1000);
    const delivered = MAILS / ((deliveredAt - start) / 1000);
    // The sink has them all; the last "sent" marks follow within moments.
    for (let tries = 0; (await s.platform.services.mail.jobs.counts()).sent < MAILS; tries++) {
      if (tries > 100) throw new Error('jobs delivered but not marked sent');
      await Bun.sleep(50);
    }
    const dupes = sink.messages.length - new Set(sink.messages.map((m) => m.messageId)).size;
    if (dupes) throw new Error(`${dupes} duplicate deliveries`);
    // Drain: mail unconfigured while the jobs are committed, then configured at once.
    sink.clear();
    await s.platform.settings.set('mail.smtp_url', '');
    for (let i = 0; i < MAILS; i++) {
      const id = crypto.randomUUID();
      await insertJob(s.platform.db, {
        id,
        keyId: null,
        mail: { ...message(i), template: undefined },
        messageId: `<${id}@example.com>`,
        maxAttempts: 5,
      });
    }
    const drainStart = performance.now();
    await s.platform.settings.set('mail.smtp_url', sink.url);
    await sink.waitFor(MAILS, 120_000);
    const drain = MAILS / ((performance.now() - drainStart) / 1000);

    rows.push([
      engine,
      `nodemailer → sink directly, ${SMTP_CONNECTIONS} pooled connections (floor)`,
      `${fmt(floor)} msg/s`,
      '1.00',
    ]);
    rows.push([
      engine,
      'POST /api/v1/mail/send async + Idempotency-Key → 202',
      `${fmt(accepted)} req/s`,
      (accepted / floor).toFixed(2),
    ]);
    rows.push([
      engine,
      'request → delivered into the sink, end to end',
      `${fmt(delivered)} msg/s`,
      (delivered / floor).toFixed(2),
    ]);
    rows.push([
      engine,
      `queue drain: committed jobs → sink (worker, concurrency ${SMTP_CONNECTIONS})`,
      `${fmt(drain)} msg/s`,
      (drain / floor).toFixed(2),
    ]);
  } finally {
    await s.stop();
    await sink.close();
  }
}

const head = ['engine', 'scenario', 'throughput', 'ratio to floor'];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (r: string[]) => '| ' + r.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
console.log(
  `Mail API (${navigator.hardwareConcurrency} CPUs; ${MAILS} messages per scenario, ${HTTP_CONCURRENCY} concurrent HTTP clients; sink = smtp-server + mailparser in the same process)`,
);
console.log(line(head));
console.log('|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
for (const r of rows) console.log(line(r));
