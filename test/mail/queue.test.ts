/**
 * The delivery queue in process, against a real SMTP sink: retry delays, jobs left by a dead
 * instance (rows written as it left them), the in-process API and templates, listing,
 * counting and purging. On the source only: it calls the mail service in this process. What
 * a client and an operator see over HTTP (retries, dead jobs, concurrency, live settings,
 * graceful shutdown) runs against the executable too: delivery.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { retryDelay } from '../../src/modules/mail/worker';
import { FROM, arrived, mailSuite, waitState } from './helpers';
import { eventually } from '../helpers/wait';

test('retry delays double from mail.retry_base_ms with jitter between half and all of it', () => {
  const table = [1, 2, 3, 4, 8].map((a) => [a, retryDelay(a, 2000, () => 0), retryDelay(a, 2000, () => 1)]);
  expect(table).toEqual([
    [1, 1000, 2000],
    [2, 2000, 4000],
    [3, 4000, 8000],
    [4, 8000, 16000],
    [8, 128000, 256000],
  ]);
  expect(retryDelay(40, 2000, () => 1)).toBe(6 * 3600 * 1000); // capped
});

describe.each(ENGINES)('mail queue on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  let key: string;
  const { send } = mailSuite(
    engine,
    { env: { BASALT_MAIL_CONCURRENCY: '2', BASALT_MAIL_MAX_ATTEMPTS: '4' } },
    (m) => ({ s, sink, key } = m),
  );
  /**
   * Rows written around the mail service, as a dead instance left them. On external PostgreSQL
   * the one-second poll finds them. The embedded engine's process is alone with its queue and
   * polls once a minute (docs/mail.md, "The queue"); a row written there in SQL is found then,
   * or at once with a notification, which is what this sends: from there on the worker follows
   * the row's lease as it would a job of its own.
   */
  const writtenAround = async () => {
    if (engine === 'embedded') await s.platform.db.notify('basalt_mail', '');
  };

  test('a job left `sending` by a dead instance is reclaimed once its lease expired', async () => {
    const id = crypto.randomUUID();
    await s.platform.db.query(
      `INSERT INTO basalt.mail_jobs (id, key_id, state, recipients, subject, text, message_id, attempts, max_attempts, lease_until, claimed_by)
       VALUES ($1, NULL, 'sending', ARRAY['ada@example.com'], 'orphan', 'x', $2, 1, 4, now() + interval '1 second', 'gone-host:1:dead')`,
      [id, `<${id}@example.com>`],
    );
    await writtenAround();
    await Bun.sleep(400);
    expect(arrived(sink, id)).toHaveLength(0); // still leased to the dead instance
    const view = await eventually(() => s.platform.services.mail.jobs.get(id), {
      until: (j) => j?.state === 'sent',
      what: 'the orphan to be sent',
      timeout: 5000,
    });
    expect(view!.attempts).toBe(2);
    expect(arrived(sink, id)).toHaveLength(1);
  });

  test('a job whose instance died on its last attempt is settled as dead, not resent', async () => {
    const id = crypto.randomUUID();
    await s.platform.db.query(
      `INSERT INTO basalt.mail_jobs (id, state, recipients, subject, text, message_id, attempts, max_attempts, lease_until, claimed_by)
       VALUES ($1, 'sending', ARRAY['ada@example.com'], 'last try', 'x', $2, 4, 4, now() - interval '1 second', 'gone-host:1:dead')`,
      [id, `<${id}@example.com>`],
    );
    await writtenAround();
    const view = await eventually(() => s.platform.services.mail.jobs.get(id), {
      until: (j) => j?.state === 'dead',
      what: 'the job to be dead',
      timeout: 5000,
    });
    expect(view!.last_error).toContain('stopped before the outcome was known');
    expect(arrived(sink, id)).toHaveLength(0);
  });

  test('in-process API: enqueue and sendNow with templates; ensure never overwrites an edited template', async () => {
    const mail = s.platform.services.mail;
    expect(mail.isConfigured()).toBe(true);
    expect(
      await mail.templates.ensure({ name: 'welcome', subject: 'Welcome {{ name }}', text: 'Hello {{ name }}' }),
    ).toBe(true);
    await mail.templates.put({
      name: 'welcome',
      subject: 'Hi {{ name }}!',
      html: '<p>{{ name }} / {{ name | raw }}</p>',
    });
    expect(
      await mail.templates.ensure({ name: 'welcome', subject: 'Welcome {{ name }}', text: 'Hello {{ name }}' }),
    ).toBe(false);
    const { jobId } = await mail.enqueue({
      to: ['ada@example.com'],
      template: 'welcome',
      variables: { name: '<Ada>' },
    });
    const now = await mail.sendNow({ to: ['bob@example.com'], subject: 'Direct', text: 'now' });
    expect(now.messageId).toBe(`<${now.jobId}@example.com>`);
    expect(arrived(sink, now.jobId)).toHaveLength(1);
    await eventually(() => mail.jobs.get(jobId), { until: (j) => j?.state === 'sent', what: 'enqueued job sent' });
    const [m] = arrived(sink, jobId);
    expect(m!.subject).toBe('Hi <Ada>!');
    expect(m!.html.trim()).toBe('<p>&lt;Ada&gt; / <Ada></p>');
    expect(await mail.templates.preview('welcome', { name: 'x&y' })).toEqual({
      subject: 'Hi x&y!',
      html: '<p>x&amp;y / x&y</p>',
      text: undefined,
    });
    expect(
      await mail.templates.render(
        { name: 'draft', subject: '{{ n }} items', text: '{% for i in (1..n) %}{{ i }}{% endfor %}' },
        { n: 3 },
      ),
    ).toEqual({ subject: '3 items', text: '123', html: undefined });
    await expect(
      mail.templates.render({ name: 'draft', subject: 's', text: '{{ a.b }}' }, { a: {} }),
    ).rejects.toMatchObject({ status: 400, extra: { details: { missing_variables: ['a.b'] } } });
    await expect(mail.enqueue({ to: ['a@x.io'], template: 'missing' })).rejects.toMatchObject({
      status: 404,
      code: 'template_not_found',
    });
  });

  test('templates cannot read files or run code, and are checked before they are stored', async () => {
    const t = s.platform.services.mail.templates;
    const bad: [string, Parameters<typeof t.put>[0], string][] = [
      ['include a file', { name: 'evil', subject: 's', text: "{% include '/etc/passwd' %}" }, ''],
      ['render a file', { name: 'evil', subject: 's', html: "{% render 'package.json' %}" }, ''],
      ['syntax error', { name: 'broken', subject: 's', text: '{% if x %}unclosed' }, 'text'],
      ['unknown filter', { name: 'broken', subject: 's', text: '{{ x | shell }}' }, 'text'],
      ['bad name', { name: 'Bad Name', subject: 's', text: 'x' }, 'name'],
      ['no body', { name: 'empty', subject: 's' }, 'html'],
      ['subject with newline', { name: 'nl', subject: 'a\nb', text: 'x' }, 'subject'],
    ];
    for (const [what, input, field] of bad) {
      let err: any;
      try {
        await t.put(input);
        // Includes parse; they must fail when rendered, never reading the file.
        await t.preview(input.name, {});
      } catch (e) {
        err = e;
      }
      expect({ what, status: err?.status, code: err?.code }).toEqual({ what, status: 400, code: 'validation_error' });
      if (field) expect(Object.keys(err.extra.details.fields)).toContain(field);
      expect(String(err.message)).not.toContain('root:');
    }
    // Prototype chain is not reachable.
    await t.put({ name: 'proto', subject: 's', text: '[{{ v.constructor }}]' });
    const out = await t.preview('proto', { v: {} }).catch((e) => e);
    expect(String(out.text ?? '')).not.toContain('function');
  });

  test('listing and counting jobs (admin panel)', async () => {
    const all = await s.platform.services.mail.jobs.list({ limit: 3 });
    expect(all.jobs.length).toBe(3);
    expect(all.total).toBeGreaterThan(3);
    const sent = await s.platform.services.mail.jobs.list({ state: 'sent' });
    expect(sent.jobs.every((j) => j.state === 'sent')).toBe(true);
    const counts = await s.platform.services.mail.jobs.counts();
    expect(counts.sent).toBe(sent.total);
  });

  test('finished jobs older than mail.job_retention_days are purged; recent and pending ones stay', async () => {
    const r = await send({ to: ['ada@example.com'], subject: 'old', text: 'x' });
    await waitState(s, key, r.body.data.job_id, 'sent');
    await s.platform.db.query(`UPDATE basalt.mail_jobs SET updated_at = now() - interval '8 days' WHERE id = $1`, [
      r.body.data.job_id,
    ]);
    const before = await s.platform.services.mail.jobs.counts();
    const purged = await s.platform.services.mail.jobs.purge();
    expect(purged!.jobs).toBe(1);
    expect(await s.platform.services.mail.jobs.get(r.body.data.job_id)).toBeUndefined();
    expect((await s.platform.services.mail.jobs.counts()).sent).toBe(before.sent - 1);
  });
});

describe.each(ENGINES)('mail configuration in process on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  beforeAll(async () => {
    sink = await startSmtpSink();
    s = await startServer(engine);
  });
  afterAll(async () => {
    await s.stop();
    await sink.close();
  });

  test('not configured: the in-process API says so and refuses (503) until both server and sender are set', async () => {
    const body = { to: ['ada@example.com'], subject: 'live', text: 'x' };
    expect(s.platform.services.mail.isConfigured()).toBe(false);
    await expect(s.platform.services.mail.enqueue(body)).rejects.toMatchObject({ status: 503 });
    await s.platform.settings.set('mail.smtp_url', sink.url);
    expect(s.platform.services.mail.isConfigured()).toBe(false); // still no sender
    await s.platform.settings.set('mail.from', FROM);
    expect(s.platform.services.mail.isConfigured()).toBe(true);
  });
});
