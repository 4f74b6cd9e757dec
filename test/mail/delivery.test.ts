/**
 * Delivery as a client and an operator see it over HTTP, against a real SMTP sink
 * (docs/mail.md): temporary refusals retried with backoff, dead jobs after the last attempt
 * or at once on a permanent refusal, put back by an administrator, bounded concurrency, mail
 * configured live, a send longer than the lease (renewed, delivered once), and a graceful
 * shutdown that gives claimed jobs back. Runs against the
 * executable (scripts/test.ts); the queue in process: queue.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { openBasalt } from '../../src/services';
import { FROM, arrived, job, mailEnv, mailSuite, waitState } from './helpers';
import { eventually } from '../helpers/wait';
import { expectBError } from '../helpers/envelopes';

describe.each(ENGINES)('mail delivery on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  let key: string;
  let a: AdminAuth;
  const { send } = mailSuite(
    engine,
    { env: { BASALT_MAIL_CONCURRENCY: '2', BASALT_MAIL_MAX_ATTEMPTS: '4' }, admin: true },
    (m) => ({ s, sink, key, a } = m),
  );

  test('the server refuses with 451 three times → retried with backoff → delivered exactly once', async () => {
    sink.refuse(3, 451, undefined, { to: 'flaky@example.com' });
    const r = await send({ to: ['flaky@example.com'], subject: 'flaky', text: 'x' });
    expect(r.status).toBe(202);
    const id = r.body.data.job_id;
    const failed = await waitState(s, key, id, 'failed');
    expect(failed.last_error).toContain('451');
    expect(new Date(failed.next_attempt_at).getTime()).toBeGreaterThan(new Date(failed.updated_at).getTime());
    const sent = await waitState(s, key, id, 'sent');
    expect(sent).toMatchObject({ attempts: 4, state: 'sent' });
    await Bun.sleep(200);
    expect(arrived(sink, id)).toHaveLength(1);
    expect(sink.refused).toBeGreaterThanOrEqual(3);
  });

  test('refused more often than mail.max_attempts → dead after the last attempt, never delivered', async () => {
    sink.refuse(4, 421, undefined, { to: 'hopeless@example.com' });
    const r = await send({ to: ['hopeless@example.com'], subject: 'hopeless', text: 'x' });
    const dead = await waitState(s, key, r.body.data.job_id, 'dead');
    expect(dead).toMatchObject({ attempts: 4, max_attempts: 4, next_attempt_at: null });
    expect(dead.last_error).toContain('421');
    expect(arrived(sink, r.body.data.job_id)).toHaveLength(0);
    // An operator can put it back in the queue.
    expect((await adminReq(s, a, 'POST', `/api/admin/mail/jobs/${r.body.data.job_id}/retry`)).status).toBe(200);
    await waitState(s, key, r.body.data.job_id, 'sent');
    expect(arrived(sink, r.body.data.job_id)).toHaveLength(1);
  });

  test('a permanent refusal (5xx) is not retried', async () => {
    sink.refuse(1, 550, 'No such user', { to: 'nobody@example.com' });
    const r = await send({ to: ['nobody@example.com'], subject: 'bounce', text: 'x' });
    const dead = await waitState(s, key, r.body.data.job_id, 'dead');
    expect(dead.attempts).toBe(1);
    expect(dead.last_error).toContain('550');
  });

  test('at most mail.concurrency sends at once; the rest wait queued', async () => {
    sink.hold();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await send({ to: ['ada@example.com'], subject: `batch ${i}`, text: 'x' })).body.data.job_id);
    await eventually(() => sink.heldCount, { until: (n) => n === 2, what: 'two messages at the SMTP server' });
    await Bun.sleep(300);
    expect(sink.heldCount).toBe(2);
    // The rest are queued, or claimed one round ahead by this instance (state sending, not yet at the server).
    const states = await Promise.all(ids.map(async (id) => (await job(s, key, id)).state));
    expect(states.filter((x) => x === 'queued' || x === 'sending')).toHaveLength(5);
    sink.release();
    for (const id of ids) await waitState(s, key, id, 'sent');
    expect(ids.map((id) => arrived(sink, id).length)).toEqual([1, 1, 1, 1, 1]);
  });
});

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
      for (const id of queued) expect((await job(s, key, id)).attempts).toBe(1);
      // The sync job was not settled as abandoned while its send ran.
      expect((await job(s, key, sync.body.data.job_id)).state).toBe('sent');
    } finally {
      sink.delay(0);
    }
  }, 40_000);
});

describe.each(ENGINES)('mail configuration over HTTP on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  let key: string;
  let a: AdminAuth;
  beforeAll(async () => {
    sink = await startSmtpSink();
    s = await startServer(engine);
    key = await createKey(s, { type: 'service', service: 'shop', permissions: ['mail:send'] });
    a = await signInAdmin(s);
  });
  afterAll(async () => {
    await s.stop();
    await sink.close();
  });

  test('not configured → 503 mail_not_configured (async and sync); configured live from the database → sent', async () => {
    const body = { to: ['ada@example.com'], subject: 'live', text: 'x' };
    for (const sync of [false, true]) {
      const r = await s.req('POST', '/api/v1/mail/send', { body: { ...body, sync }, headers: { 'x-api-key': key } });
      expectBError(r, 503, 'mail_not_configured');
      expect(r.body.errors[0].message).toContain('mail.smtp_url');
    }
    await s.settings.set('mail.smtp_url', sink.url);
    await s.settings.set('mail.from', 'not an address');
    const badFrom = await s.req('POST', '/api/v1/mail/send', { body, headers: { 'x-api-key': key } });
    expectBError(badFrom, 503, 'mail_not_configured');
    expect(badFrom.body.errors[0].message).toContain("mail.from 'not an address' is not an address");
    await s.settings.set('mail.from', `"Acme Shop" <${FROM}>`);
    const r = await s.req('POST', '/api/v1/mail/send', { body, headers: { 'x-api-key': key } });
    expect(r.status).toBe(202);
    await waitState(s, key, r.body.data.job_id, 'sent');
    expect(arrived(sink, r.body.data.job_id)[0]!.from).toBe(FROM);
  });

  test('changing mail.smtp_url rebuilds the transport; an unreachable server → 502 sync, retries async', async () => {
    const other = await startSmtpSink();
    await s.settings.set('mail.smtp_url', other.url);
    const t = await adminReq(s, a, 'POST', '/api/admin/mail/test', { to: 'ops@example.com' });
    expect(t.status).toBe(200);
    expect(other.messages.map((m) => m.messageId)).toEqual([t.body.data.message_id]);
    expect(other.messages[0]!.subject).toContain('test message');
    await other.close();
    const r = await s.req('POST', '/api/v1/mail/send', {
      body: { to: ['a@x.io'], subject: 'down', text: 'x', sync: true },
      headers: { 'x-api-key': key },
    });
    expect(r.status).toBe(502);
    expect(r.body.errors[0].message).not.toContain('127.0.0.1');
    const q = await s.req('POST', '/api/v1/mail/send', {
      body: { to: ['a@x.io'], subject: 'down', text: 'x' },
      headers: { 'x-api-key': key },
    });
    const failed = await waitState(s, key, q.body.data.job_id, 'failed');
    expect(failed.last_error).toMatch(/could not connect|connection to the mail server failed/);
    await s.settings.set('mail.smtp_url', sink.url);
    await s.settings.set('mail.retry_base_ms', 40);
    expect((await adminReq(s, a, 'POST', `/api/admin/mail/jobs/${q.body.data.job_id}/retry`)).status).toBe(200);
    await waitState(s, key, q.body.data.job_id, 'sent');
    expect(arrived(sink, q.body.data.job_id)).toHaveLength(1);
  });
});

describe.each(ENGINES)('mail at a graceful shutdown on %s', (engine) => {
  test('a claimed job still at the SMTP server is given back to the queue', async () => {
    const db = await freshDb(engine);
    const sink = await startSmtpSink();
    try {
      const s = await startServer(engine, { db, env: mailEnv(sink) });
      const key = await createKey(s, { type: 'service', service: 'shop', permissions: ['mail:send'] });
      sink.hold();
      const r = await s.req('POST', '/api/v1/mail/send', {
        body: { to: ['a@x.io'], subject: 'at shutdown', text: 'x' },
        headers: { 'x-api-key': key },
      });
      await waitState(s, key, r.body.data.job_id, 'sending');
      await eventually(() => sink.heldCount, { until: (n) => n === 1, what: 'the message at the SMTP server' });
      await s.stop(); // SIGTERM on the executable; its database stays (it is the test's)
      // The send was aborted: the connection is gone, so the held message is never delivered.
      await eventually(() => sink.heldCount, { until: (n) => n === 0, what: 'the stopped sender to disconnect' });
      sink.release();
      // The server is gone; read the row through a platform that runs no worker (no listener).
      const again = await openBasalt({ env: { ...db.env, BASALT_LOG_LEVEL: 'silent' }, migrate: false });
      try {
        const row = (
          await again.db.query<{ state: string; claimed_by: string | null; attempts: number }>(
            'SELECT state, claimed_by, attempts FROM basalt.mail_jobs WHERE id = $1',
            [r.body.data.job_id],
          )
        ).rows[0]!;
        expect(row).toEqual({ state: 'queued', claimed_by: null, attempts: 0 });
      } finally {
        await again.shutdown();
      }
      expect(sink.messages).toHaveLength(0);
    } finally {
      await sink.close();
      await db.drop();
    }
  }, 60_000);
});
