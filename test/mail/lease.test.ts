/**
 * Leases and shutdown against a slow SMTP server: a send that takes longer than
 * `mail.lease_ms` keeps its lease (heartbeat) and is delivered once; at shutdown a send
 * the server accepts within the grace is recorded sent, one still unanswered is aborted
 * and given back, never delivered twice.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { openBasalt, type Basalt } from '../../src/services';
import { createMailService } from '../../src/modules/mail/service';
import { FROM, arrived, mailEnv, waitState } from './helpers';
import { eventually } from '../helpers/wait';

describe.each(ENGINES)('mail leases on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  let key: string;
  const send = (body: unknown) => s.req('POST', '/api/v1/mail/send', { body, headers: { 'x-api-key': key } });

  beforeAll(async () => {
    sink = await startSmtpSink();
    // The shortest lease the settings allow, far below the server's answer time.
    s = await startServer(engine, {
      env: mailEnv(sink, { BASALT_MAIL_LEASE_MS: '1000', BASALT_MAIL_CONCURRENCY: '2' }),
    });
    key = await createKey(s, { type: 'service', service: 'shop', permissions: ['mail:send'] });
  });
  afterAll(async () => {
    await s.stop();
    await sink.close();
  });

  test('the server takes 3.5× the lease to accept → the lease is renewed, each job delivered exactly once', async () => {
    sink.delay(3500);
    try {
      const queued = [];
      for (let i = 0; i < 3; i++)
        queued.push((await send({ to: ['ada@example.com'], subject: `slow ${i}`, text: 'x' })).body.data.job_id);
      const k = crypto.randomUUID();
      const syncBody = { to: ['ada@example.com'], subject: 'slow sync', text: 'x', sync: true };
      const pending = s.req('POST', '/api/v1/mail/send', {
        body: syncBody,
        headers: { 'x-api-key': key, 'Idempotency-Key': k },
      });
      // Twice the lease later the key is still held by the running send: a duplicate is 409, not a second send.
      await Bun.sleep(2000);
      const dup = await s.req('POST', '/api/v1/mail/send', {
        body: syncBody,
        headers: { 'x-api-key': key, 'Idempotency-Key': k },
      });
      expect(dup.status).toBe(409);
      const sync = await pending;
      expect(sync.status).toBe(200);
      for (const id of queued) await waitState(s, key, id, 'sent', 20_000);
      await Bun.sleep(1500); // a duplicate would have been claimed by now (poll every second, lease 1 s)
      expect([...queued, sync.body.data.job_id].map((id) => arrived(sink, id).length)).toEqual([1, 1, 1, 1]);
      for (const id of queued) expect((await s.platform.services.mail.jobs.get(id))!.attempts).toBe(1);
      // The sync job was not settled as abandoned while its send ran.
      expect((await s.platform.services.mail.jobs.get(sync.body.data.job_id))!.state).toBe('sent');
    } finally {
      sink.delay(0);
    }
  }, 40_000);
});

describe.each(ENGINES)('mail shutdown on %s', (engine) => {
  let db: FreshDb;
  let sink: SmtpSink;
  const open = (extra: Record<string, string> = {}) =>
    openBasalt({
      env: {
        ...db.env,
        BASALT_LOG_LEVEL: 'silent',
        BASALT_MAIL_SMTP_URL: sink.url,
        BASALT_MAIL_FROM: FROM,
        BASALT_MAIL_CONCURRENCY: '2',
        ...extra,
      },
      migrate: true,
    });
  const row = async (p: Basalt, id: string) =>
    (
      await p.db.query<{ state: string; attempts: number; claimed_by: string | null }>(
        'SELECT state, attempts, claimed_by FROM basalt.mail_jobs WHERE id = $1',
        [id],
      )
    ).rows[0];

  beforeAll(async () => {
    db = await freshDb(engine);
    sink = await startSmtpSink();
  });
  afterAll(async () => {
    await sink.close();
    await db.drop();
  });

  test('accepted within the grace → sent; still unanswered → aborted and given back, delivered once after restart', async () => {
    const p = await open();
    const mail = createMailService(p, { shutdownGraceMs: 2500 });
    await mail.startWorker();
    // A: the server answers after 1.2 s (inside the grace). B: the server never answers.
    sink.delay(1200);
    const a = await mail.enqueue({ to: ['ada@example.com'], subject: 'inside grace', text: 'x' });
    await eventually(() => sink.heldCount, { until: (n) => n === 1, what: 'A at the server' });
    sink.hold();
    const b = await mail.enqueue({ to: ['bob@example.com'], subject: 'past grace', text: 'x' });
    await eventually(() => sink.heldCount, { until: (n) => n === 2, what: 'B at the server' });
    await p.shutdown();
    // B's connection was closed before the server answered: releasing it now delivers nothing.
    await eventually(() => sink.heldCount, {
      until: (n) => n === 0,
      what: 'the sink to see the aborted connection close',
      timeout: 3000,
    });
    sink.release();
    sink.delay(0);
    await Bun.sleep(200);
    expect(arrived(sink, a.jobId)).toHaveLength(1);
    expect(arrived(sink, b.jobId)).toHaveLength(0);

    const again = await open();
    try {
      expect(await row(again, a.jobId)).toMatchObject({ state: 'sent', attempts: 1 });
      // Given back as not attempted, so a restart (or another instance) sends it at once.
      expect(await row(again, b.jobId)).toEqual({ state: 'queued', attempts: 0, claimed_by: null });
      await again.services.mail.startWorker();
      await eventually(() => row(again, b.jobId), {
        until: (r) => r?.state === 'sent',
        what: 'B sent after the restart',
      });
      await Bun.sleep(200);
      expect(arrived(sink, a.jobId)).toHaveLength(1);
      expect(arrived(sink, b.jobId)).toHaveLength(1);
    } finally {
      await again.shutdown();
    }
  }, 30_000);
});
