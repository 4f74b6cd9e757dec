/**
 * The contact-form example extension end to end: a static site's form post (JSON
 * or urlencoded) → validation → per-IP rate limit → the operator's inbox (a real
 * SMTP server), on both engines.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { createKey } from '../helpers/keys';
import { REPO_EXTENSIONS } from './support';
import { expectB, expectBError } from '../helpers/envelopes';
import { openSse } from '../realtime/sse';

const PATH = '/api/module/contact-form/submit';
let n = 0;
const ip = () => `198.18.${Math.floor(++n / 250)}.${n % 250}`;

describe.each(ENGINES)('contact form on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  const settings = () => s.platform.services.extensions.settings('contact-form')!;

  beforeAll(async () => {
    sink = await startSmtpSink();
    s = await startServer(engine, {
      env: {
        BASALT_EXTENSIONS_DIR: REPO_EXTENSIONS,
        BASALT_MAIL_SMTP_URL: sink.url,
        BASALT_MAIL_FROM: 'site@example.com',
        BASALT_MAIL_RETRY_BASE_MS: '50',
        // One send at a time: the queue is delivered in the order it was filled (the honeypot's sentinel).
        BASALT_MAIL_CONCURRENCY: '1',
        BASALT_WEB_TRUSTED_PROXIES: '127.0.0.1',
        BASALT_EXT_CONTACT_FORM_RATE_LIMIT_PER_HOUR: '3',
      },
    });
    await settings().set('to', 'owner@example.com');
  });
  afterAll(async () => {
    await s.stop();
    await sink.close();
  });

  test('set up: loaded, its migration applied, its template ensured', async () => {
    expect(s.platform.services.extensions.get('contact-form')).toMatchObject({
      status: 'loaded',
      migrations: ['001_rate_limits.sql'],
      routes: ['POST /api/module/contact-form/submit'],
    });
    expect(await s.platform.services.mail.templates.get('contact_form_message')).toMatchObject({
      name: 'contact_form_message',
    });
  });

  test('a JSON submission reaches the operator, HTML-escaped', async () => {
    sink.clear();
    const r = await s.req('POST', PATH, {
      body: { name: 'Ada', email: 'ada@example.com', subject: 'Hello', message: 'Hi <script>alert(1)</script>' },
      headers: { 'x-forwarded-for': ip() },
    });
    expectB(r, 202, { accepted: true });
    const [m] = await sink.waitFor(1);
    expect(m!.to).toEqual(['owner@example.com']);
    expect(m!.subject).toBe('Contact form: Hello (from Ada)');
    expect(m!.text).toContain('Hi <script>alert(1)</script>');
    expect(m!.html).toContain('Hi &lt;script&gt;alert(1)&lt;/script&gt;');
    expect(m!.html).not.toContain('<script>');
  });

  test('a submission is announced on its realtime channel (contact-form:submissions), without its content', async () => {
    sink.clear();
    const c = await openSse(`${s.publicUrl}/api/v1/realtime?channels=contact-form:submissions`);
    expect(c.status).toBe(200);
    const r = await s.req('POST', PATH, {
      body: { name: 'Lin', email: 'lin@example.com', message: 'Announce me' },
      headers: { 'x-forwarded-for': ip() },
    });
    expect(r.status).toBe(202);
    const [m] = await c.waitFor(1, 'message');
    expect(m!.data.channel).toBe('contact-form:submissions');
    expect(Object.keys(m!.data.data)).toEqual(['received_at']);
    expect(Number.isNaN(Date.parse(m!.data.data.received_at))).toBe(false);
    c.close();
    // Its mail is delivered before the next test counts what the sink received.
    expect((await sink.waitFor(1)).map((m) => m.subject)).toEqual(['Contact form: new message (from Lin)']);
  });

  test('a plain HTML form post (urlencoded) works, and redirects when redirect_url is set', async () => {
    sink.clear();
    const form = new URLSearchParams({ name: 'Grace', email: 'grace@example.com', message: 'From a static page' });
    const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': ip() };
    const r = await s.req('POST', PATH, { raw: form.toString(), headers });
    expect(r.status).toBe(202);
    await settings().set('redirect_url', 'https://site.example/thanks');
    try {
      const res = await fetch(s.publicUrl + PATH, {
        method: 'POST',
        body: form.toString(),
        headers: { ...headers, 'x-forwarded-for': ip() },
        redirect: 'manual',
      });
      expect(res.status).toBe(303);
      expect(res.headers.get('location')).toBe('https://site.example/thanks');
    } finally {
      await settings().unset('redirect_url');
    }
    const got = await sink.waitFor(2);
    expect(got.map((m) => m.subject)).toEqual([
      'Contact form: new message (from Grace)',
      'Contact form: new message (from Grace)',
    ]);
  });

  test.each([
    ['missing message', { name: 'A', email: 'a@example.com' }, 'message'],
    ['bad e-mail', { name: 'A', email: 'not-an-address', message: 'x' }, 'email'],
    ['empty name', { name: '', email: 'a@example.com', message: 'x' }, 'name'],
    ['message too long', { name: 'A', email: 'a@example.com', message: 'x'.repeat(5001) }, 'message'],
  ])('invalid: %s → 400 naming the field', async (_name, body, field) => {
    const r = await s.req('POST', PATH, { body, headers: { 'x-forwarded-for': ip() } });
    expectBError(r, 400, 'validation_error');
    expect(Object.keys(r.body.errors[0].details.fields)).toContain(field);
  });

  test('the honeypot field is accepted silently and nothing is sent', async () => {
    sink.clear();
    const r = await s.req('POST', PATH, {
      body: { name: 'Bot', email: 'bot@example.com', message: 'buy', website: 'http://spam' },
      headers: { 'x-forwarded-for': ip() },
    });
    expect(r.status).toBe(202);
    // A sentinel: a real submission after it. A mail is queued before the 202, and the queue is
    // sent in order, one at a time here, so a mail for the bot would reach the sink first.
    const sentinel = await s.req('POST', PATH, {
      body: { name: 'Sentinel', email: 'sentinel@example.com', message: 'after the bot' },
      headers: { 'x-forwarded-for': ip() },
    });
    expect(sentinel.status).toBe(202);
    expect((await sink.waitFor(1)).map((m) => m.subject)).toEqual(['Contact form: new message (from Sentinel)']);
  });

  test('rate limit per IP (3/hour here): the 4th → 429 with Retry-After; another IP is unaffected', async () => {
    const me = ip();
    const body = { name: 'R', email: 'r@example.com', message: 'again' };
    const statuses = [];
    for (let i = 0; i < 4; i++)
      statuses.push((await s.req('POST', PATH, { body, headers: { 'x-forwarded-for': me } })).status);
    expect(statuses).toEqual([202, 202, 202, 429]);
    const limited = await s.req('POST', PATH, { body, headers: { 'x-forwarded-for': me } });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(3500);
    expectBError(limited, 429, 'rate_limited', {
      details: expect.objectContaining({ retry_after: expect.any(Number) }),
    });
    expect((await s.req('POST', PATH, { body, headers: { 'x-forwarded-for': ip() } })).status).toBe(202);
  });

  test.each([
    ['no recipient configured', undefined],
    ['the recipient is not an address', 'not-an-address'],
  ])('%s → 503 not_configured, visitor sees no internals', async (_name, to) => {
    if (to === undefined) await settings().unset('to');
    else await settings().set('to', to);
    try {
      const r = await s.req('POST', PATH, {
        body: { name: 'A', email: 'a@example.com', message: 'x' },
        headers: { 'x-forwarded-for': ip() },
      });
      expectBError(r, 503, 'not_configured');
      expect(r.text).not.toContain('not-an-address');
    } finally {
      await settings().set('to', 'owner@example.com');
    }
  });

  test('api_key_required mode: the module route needs the site public key', async () => {
    const key = await createKey(s, { type: 'public' });
    await s.platform.settings.set('web.public_api_access_mode', 'api_key_required');
    try {
      const body = { name: 'K', email: 'k@example.com', message: 'with key' };
      const without = await s.req('POST', PATH, { body, headers: { 'x-forwarded-for': ip() } });
      expectBError(without, 401, 'api_key_required');
      const withKey = await s.req('POST', PATH, { body, headers: { 'x-forwarded-for': ip(), 'x-api-key': key } });
      expect(withKey.status).toBe(202);
    } finally {
      await s.platform.settings.set('web.public_api_access_mode', 'open');
    }
  });
});
