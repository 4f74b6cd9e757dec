/**
 * Idempotency (docs/mail.md): replay, payload mismatch, in-flight duplicates and
 * concurrent duplicates, enforced by the database's unique key. Over HTTP: runs against the
 * executable (scripts/test.ts); settings, templates and jobs go through the admin API. The
 * key's 24-hour life needs the clock moved in the database: idempotency-expiry.test.ts.
 */
import { describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { adminReq, type AdminAuth } from '../helpers/admin';
import type { SmtpSink } from '../helpers/smtp-sink';
import { arrived, mailSuite, waitState } from './helpers';
import { eventually } from '../helpers/wait';
import { expectBError } from '../helpers/envelopes';

describe.each(ENGINES)('mail idempotency on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  let key: string;
  let a: AdminAuth;
  /** The jobs with this subject, as the Mail jobs screen lists them (`state`: only those). */
  const jobsOf = async (subject: string, state = ''): Promise<any[]> => {
    const r = await adminReq(s, a, 'GET', `/api/admin/mail/jobs?limit=500${state ? `&state=${state}` : ''}`);
    expect([r.status, r.body.data.next_cursor]).toEqual([200, null]);
    return r.body.data.jobs.filter((j: { subject: string }) => j.subject === subject);
  };
  // Mail configured in the database, not the environment (which would win), so a test can unconfigure it.
  // One send at a time: the queue goes out in the order it was filled (the sentinels below).
  const { send } = mailSuite(
    engine,
    { inDatabase: true, admin: true, env: { BASALT_MAIL_CONCURRENCY: '1' } },
    (m) => ({ s, sink, key, a } = m),
  );
  /**
   * A sentinel for "sent once": a mail queued after the requests, once it arrived. A job is
   * queued before its request is answered and this instance sends its queue in order, one at
   * a time, so a second job for them would have reached the sink before it.
   */
  const sentinel = async () => {
    const r = await send(msg('sentinel'));
    expect(r.status).toBe(202);
    await sink.waitFor(1, 10_000, (m) => m.messageId === `<${r.body.data.job_id}@example.com>`);
  };
  const msg = (subject: string, extra: Record<string, unknown> = {}) => ({
    to: ['ada@example.com'],
    subject,
    text: 'body',
    ...extra,
  });

  test('same key and payload → the original 202 and body, Idempotent-Replayed: true, sent once', async () => {
    const k = crypto.randomUUID();
    const first = await send(msg('replay'), { 'Idempotency-Key': k });
    expect(first.status).toBe(202);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    // Same payload with keys in another order and the key in the other header name / the body.
    const variants = [
      await send({ text: 'body', subject: 'replay', to: ['ada@example.com'] }, { 'Idempotency-Key': k }),
      await send(msg('replay'), { 'X-Idempotency-Key': k.toUpperCase() }),
      await send(msg('replay', { idempotency_key: k })),
      await send(msg('replay', { idempotency_key: k }), { 'Idempotency-Key': k }),
    ];
    for (const r of variants) {
      expect(r.status).toBe(202);
      expect(r.headers.get('idempotent-replayed')).toBe('true');
      expect(r.body.data).toEqual(first.body.data);
      expect(r.body.meta.trace_id).toBe(r.headers.get('x-request-id')!);
    }
    await waitState(s, key, first.body.data.job_id, 'sent');
    await sentinel();
    expect(arrived(sink, first.body.data.job_id)).toHaveLength(1);
    expect(sink.messages.filter((m) => m.subject === 'replay')).toHaveLength(1);
  });

  test('a replay answers the original even after the template was deleted, max_recipients lowered or mail unconfigured', async () => {
    const put = await adminReq(s, a, 'PUT', '/api/admin/templates/replay_tpl', {
      subject: 'Hi {{ name }}',
      text: 'Hello {{ name }}',
    });
    expect(put.status).toBe(200);
    const queued = { to: ['ada@example.com', 'bob@example.com'], template: 'replay_tpl', variables: { name: 'Ada' } };
    const k1 = crypto.randomUUID();
    const k2 = crypto.randomUUID();
    const first = await send(queued, { 'Idempotency-Key': k1 });
    expect(first.status).toBe(202);
    const firstSync = await send({ ...queued, sync: true }, { 'Idempotency-Key': k2 });
    expect(firstSync.status).toBe(200);
    const settings = s.settings;
    try {
      expect((await adminReq(s, a, 'DELETE', '/api/admin/templates/replay_tpl')).status).toBe(200);
      await settings.set('mail.max_recipients', 1);
      await settings.set('mail.smtp_url', '');
      // A new key would be refused now, for each of the three changes…
      const fresh = { 'Idempotency-Key': crypto.randomUUID() };
      expectBError(await send(queued, fresh), 400, 'validation_error');
      expectBError(
        await send({ ...queued, to: ['ada@example.com'] }, { 'Idempotency-Key': crypto.randomUUID() }),
        404,
        'template_not_found',
      );
      expectBError(await send(msg('new'), { 'Idempotency-Key': crypto.randomUUID() }), 503, 'mail_not_configured');
      // …but the same key and payload get the original answers back.
      for (const [body, k, orig] of [
        [queued, k1, first],
        [{ ...queued, sync: true }, k2, firstSync],
      ] as const) {
        const again = await send(body, { 'Idempotency-Key': k });
        expect({
          status: again.status,
          replayed: again.headers.get('idempotent-replayed'),
          data: again.body.data,
        }).toEqual({ status: orig.status, replayed: 'true', data: orig.body.data });
      }
      // A different payload with a used key is still 422, not a validation error of today.
      expect((await send({ ...queued, variables: { name: 'Eve' } }, { 'Idempotency-Key': k1 })).status).toBe(422);
    } finally {
      await settings.set('mail.smtp_url', sink.url);
      await settings.set('mail.max_recipients', 50);
    }
    await waitState(s, key, first.body.data.job_id, 'sent');
    expect(arrived(sink, first.body.data.job_id)).toHaveLength(1);
    expect(arrived(sink, firstSync.body.data.job_id)).toHaveLength(1);
  });

  test('same key, different payload → 422 idempotency_key_reused', async () => {
    const k = crypto.randomUUID();
    expect((await send(msg('first'), { 'Idempotency-Key': k })).status).toBe(202);
    const cases = [
      msg('second'),
      msg('first', { to: ['bob@example.com'] }),
      msg('first', { sync: true }),
      msg('first', { html: '<p>x</p>' }),
    ];
    for (const body of cases) {
      const r = await send(body, { 'Idempotency-Key': k });
      expectBError(r, 422, 'idempotency_key_reused');
    }
  });

  test('header and body keys that differ → 400; both headers that differ → 400; a non-UUID header → 400', async () => {
    const a = await send(msg('x', { idempotency_key: crypto.randomUUID() }), {
      'Idempotency-Key': crypto.randomUUID(),
    });
    expect(a.status).toBe(400);
    expect(a.body.errors[0].details.fields).toHaveProperty('idempotency_key');
    const both = await send(msg('two headers'), {
      'Idempotency-Key': crypto.randomUUID(),
      'X-Idempotency-Key': crypto.randomUUID(),
    });
    expectBError(both, 400, 'validation_error');
    expect(both.body.errors[0].details.fields).toHaveProperty('X-Idempotency-Key');
    // The same value in both headers is one key.
    const k = crypto.randomUUID();
    const same = await send(msg('two headers'), { 'Idempotency-Key': k, 'X-Idempotency-Key': k.toUpperCase() });
    expect(same.status).toBe(202);
    expect((await send(msg('two headers'), { 'X-Idempotency-Key': k })).headers.get('idempotent-replayed')).toBe(
      'true',
    );
    const b = await send(msg('x'), { 'Idempotency-Key': 'order-42' });
    expect(b.status).toBe(400);
    expect(b.body.errors[0].details.fields).toHaveProperty('Idempotency-Key');
  });

  test('the key is scoped to the API key: another key with the same value is a new request', async () => {
    const k = crypto.randomUUID();
    const other = await createKey(s, { type: 'service', service: 'crm', permissions: ['mail:send'] });
    const a = await send(msg('scoped'), { 'Idempotency-Key': k });
    const b = await send(msg('scoped'), { 'Idempotency-Key': k }, other);
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(b.body.data.job_id).not.toBe(a.body.data.job_id);
  });

  test('8 concurrent duplicates → one job, one delivery, seven replays', async () => {
    const k = crypto.randomUUID();
    const rs = await Promise.all(Array.from({ length: 8 }, () => send(msg('burst'), { 'Idempotency-Key': k })));
    // With the async path the duplicates wait on the unique key and replay; 409 is also a correct answer.
    expect(rs.every((r) => r.status === 202 || r.status === 409)).toBe(true);
    const ok = rs.filter((r) => r.status === 202);
    expect(new Set(ok.map((r) => r.body.data.job_id)).size).toBe(1);
    expect(ok.filter((r) => r.headers.get('idempotent-replayed') !== 'true')).toHaveLength(1);
    const id = ok[0]!.body.data.job_id;
    await waitState(s, key, id, 'sent');
    await sentinel();
    expect(sink.messages.filter((m) => m.subject === 'burst')).toHaveLength(1);
    expect(await jobsOf('burst')).toHaveLength(1);
  });

  test('8 concurrent sync duplicates → exactly one delivery; the others replay it or get 409', async () => {
    const k = crypto.randomUUID();
    const rs = await Promise.all(
      Array.from({ length: 8 }, () => send(msg('sync-burst', { sync: true }), { 'Idempotency-Key': k })),
    );
    const codes = rs.map((r) => r.status).sort();
    expect(codes.filter((c) => c === 200).length).toBeGreaterThanOrEqual(1);
    expect(codes.every((c) => c === 200 || c === 409)).toBe(true);
    for (const r of rs.filter((r) => r.status === 409)) expectBError(r, 409, 'idempotency_key_in_progress');
    expect(sink.messages.filter((m) => m.subject === 'sync-burst')).toHaveLength(1);
  });

  test('while the first sync send is in flight → 409 idempotency_key_in_progress; afterwards → replay', async () => {
    const k = crypto.randomUUID();
    sink.hold();
    const first = send(msg('held', { sync: true }), { 'Idempotency-Key': k });
    await eventually(() => jobsOf('held', 'sending'), {
      until: (l) => l.length > 0,
      what: 'the sync send to start',
    });
    const dup = await send(msg('held', { sync: true }), { 'Idempotency-Key': k });
    expectBError(dup, 409, 'idempotency_key_in_progress');
    expect(dup.headers.get('retry-after')).toBe('1');
    sink.release();
    const r = await first;
    expect(r.status).toBe(200);
    const again = await send(msg('held', { sync: true }), { 'Idempotency-Key': k });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.data).toEqual(r.body.data);
    expect(sink.messages.filter((m) => m.subject === 'held')).toHaveLength(1);
  });

  test('a sync send the server refused frees the key: the retry with the same key is sent', async () => {
    const k = crypto.randomUUID();
    sink.refuse(1, 554, undefined, { to: 'retry-me@example.com' });
    const retryMe = msg('retry-me', { sync: true, to: ['retry-me@example.com'] });
    const a = await send(retryMe, { 'Idempotency-Key': k });
    expect(a.status).toBe(502);
    const b = await send(retryMe, { 'Idempotency-Key': k });
    expect(b.status).toBe(200);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(sink.messages.filter((m) => m.subject === 'retry-me')).toHaveLength(1);
  });
});
