/**
 * Two serving instances on one external database share the mail queue (docs/mail.md): the
 * same Idempotency-Key sent to both at once makes one job; a server slower than a short
 * lease, with both instances polling, still gets every job once. Runs against the executable
 * (scripts/test.ts): two `basalt serve` processes, the queue read with SQL beside them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { FROM, arrived } from './helpers';
import { eventually } from '../helpers/wait';
import { expectBError } from '../helpers/envelopes';

const msg = (subject: string) => ({ to: ['ada@example.com'], subject, text: 'x' });

describe.skipIf(!ENGINES.includes('external'))('mail on two serving instances of one external database', () => {
  let sink: SmtpSink;
  let a: TestServer;
  let b: TestServer;
  let key: string;
  const send = (s: TestServer, body: unknown, headers: Record<string, string> = {}) =>
    s.req('POST', '/api/v1/mail/send', { body, headers: { 'x-api-key': key, ...headers } });
  beforeAll(async () => {
    sink = await startSmtpSink();
    const env = {
      BASALT_MAIL_SMTP_URL: sink.url,
      BASALT_MAIL_FROM: FROM,
      BASALT_MAIL_LEASE_MS: '1000',
      BASALT_MAIL_CONCURRENCY: '2',
    };
    a = await startServer('external', { env });
    b = await startServer('external', { db: a.db, env });
    key = await createKey(a, { type: 'service', service: 'pair', permissions: ['mail:send'] });
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await sink?.close();
  });

  test('the same Idempotency-Key at A and B at once → one job, one delivery, the other replays or gets 409', async () => {
    for (const sync of [false, true]) {
      for (let round = 0; round < 5; round++) {
        const k = crypto.randomUUID();
        const subject = `pair ${sync} ${round}`;
        const rs = await Promise.all([a, b].map((s) => send(s, { ...msg(subject), sync }, { 'Idempotency-Key': k })));
        const ok = sync ? 200 : 202;
        expect(rs.every((r) => r.status === ok || r.status === 409)).toBe(true);
        for (const r of rs.filter((r) => r.status === 409)) expectBError(r, 409, 'idempotency_key_in_progress');
        const answered = rs.filter((r) => r.status === ok);
        expect(answered.filter((r) => r.headers.get('idempotent-replayed') !== 'true')).toHaveLength(1);
        expect(new Set(answered.map((r) => r.body.data.job_id)).size).toBe(1);
        const rows = await a.sql<{ id: string }>('SELECT id FROM basalt.mail_jobs WHERE subject = $1', [subject]);
        expect(rows).toHaveLength(1);
        await eventually(() => arrived(sink, rows[0]!.id).length, {
          until: (n) => n >= 1,
          what: `${subject} delivered`,
        });
      }
    }
    await Bun.sleep(300);
    const pairs = sink.messages.filter((m) => m.subject.startsWith('pair '));
    expect(pairs).toHaveLength(10);
    expect(new Set(pairs.map((m) => m.messageId)).size).toBe(10);
  }, 30_000);

  test('a server slower than the 1 s lease, both instances polling → every job delivered exactly once', async () => {
    sink.delay(3000);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push((await send(i % 2 ? a : b, msg(`slow pair ${i}`))).body.data.job_id);
      await eventually(
        async () =>
          (
            await a.sql<{ n: string }>(
              "SELECT count(*) AS n FROM basalt.mail_jobs WHERE state = 'sent' AND id = ANY($1::uuid[])",
              [ids],
            )
          )[0]!.n,
        { until: (n) => n === '6', what: 'all six sent', timeout: 30_000 },
      );
      await Bun.sleep(1500);
      expect(ids.map((id) => arrived(sink, id).length)).toEqual(ids.map(() => 1));
      const rows = await a.sql<{ attempts: number }>(
        'SELECT attempts FROM basalt.mail_jobs WHERE id = ANY($1::uuid[])',
        [ids],
      );
      expect(rows.map((r) => r.attempts)).toEqual(ids.map(() => 1));
    } finally {
      sink.delay(0);
    }
  }, 45_000);
});
