/**
 * POST /api/v1/mail/send and GET /api/v1/mail/jobs/<id> against a real SMTP sink:
 * what arrives, every validation and permission answer, the job view. Over HTTP: runs
 * against the executable (scripts/test.ts); jobs and templates are read and written through
 * the admin API.
 */
import { describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { createKey, revokeKey } from '../helpers/keys';
import { adminReq, type AdminAuth } from '../helpers/admin';
import type { SmtpSink } from '../helpers/smtp-sink';
import { FROM, arrived, job, mailSuite, waitState } from './helpers';
import { isValidAddress } from '../../src/modules/mail/message';
import { expectB, expectBError } from '../helpers/envelopes';

test.each([
  ['ada@example.com', true],
  ['ada.lovelace+news@mail.example.co.uk', true],
  ["o'brien@example.ie", true],
  ['user@localhost', true],
  ['a@xn--bcher-kva.example', true],
  ['x'.repeat(64) + '@example.com', true],
  ['x'.repeat(65) + '@example.com', false],
  ['a@' + 'b'.repeat(63) + '.' + 'c'.repeat(63) + '.' + 'd'.repeat(63) + '.' + 'e'.repeat(62), false], // 256 characters,
  ['plainaddress', false],
  ['@example.com', false],
  ['ada@', false],
  ['ada..l@example.com', false],
  ['.ada@example.com', false],
  ['ada@-example.com', false],
  ['ada@example..com', false],
  ['Ada <ada@example.com>', false],
  ['"ada"@example.com', false],
  ['ada@example.com, eve@evil.io', false],
  ['ada@example.com\nBcc: eve@evil.io', false],
  ['ada @example.com', false],
  ['ädä@example.com', false],
] as [string, boolean][])('address %p valid: %p', (addr, ok) => {
  expect(isValidAddress(addr)).toBe(ok);
});

const RESET_VARS = {
  app_name: 'Acme',
  email: 'ada@example.com',
  link: 'https://acme.test/reset?token=t1&x=<y>',
  token: 't1',
  expires_in_minutes: 30,
};

describe.each(ENGINES)('mail send on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  let key: string;
  let a: AdminAuth;
  /** Every job, as the Mail jobs screen lists them (newest first). */
  const jobs = async (query = ''): Promise<any[]> => {
    const r = await adminReq(s, a, 'GET', `/api/admin/mail/jobs?limit=500${query}`);
    expect([r.status, r.body.data.next_cursor]).toEqual([200, null]);
    return r.body.data.jobs;
  };
  const { send } = mailSuite(
    engine,
    { env: { BASALT_MAIL_MAX_RECIPIENTS: '3' }, admin: true },
    (m) => ({ s, sink, key, a } = m),
  );

  test('inline message, async: 202, then delivered with subject, both bodies, every recipient and a stable Message-ID', async () => {
    const r = await send({
      to: ['ada@example.com', 'bob@example.org'],
      subject: 'Order 42 shipped — Grüße 🎉',
      text: 'Your order is on its way. Ünïcödé ✓',
      html: '<p>Your order is <b>on its way</b>.</p>',
    });
    expectB(r, 202, expect.objectContaining({ sync: false, recipient_count: 2 }));
    expect(typeof r.body.meta.execution_ms).toBe('number');
    const id = r.body.data.job_id;
    await waitState(s, key, id, 'sent');
    const [m, ...more] = arrived(sink, id);
    expect(more).toHaveLength(0);
    expect(m).toMatchObject({
      subject: 'Order 42 shipped — Grüße 🎉',
      from: FROM,
      envelopeFrom: FROM,
      to: ['ada@example.com', 'bob@example.org'],
      envelopeTo: ['ada@example.com', 'bob@example.org'],
    });
    expect(m!.text.trim()).toBe('Your order is on its way. Ünïcödé ✓');
    expect(m!.html).toBe('<p>Your order is <b>on its way</b>.</p>');
    const view = await job(s, key, id);
    expect(view).toMatchObject({
      job_id: id,
      state: 'sent',
      attempts: 1,
      recipient_count: 2,
      last_error: null,
      message_id: `<${id}@example.com>`,
      template: null,
    });
    expect(new Date(view.sent_at).getTime()).toBeGreaterThan(0);
  });

  test('template, sync: 200 only after the server accepted it; HTML escaped, text verbatim, subject rendered', async () => {
    const vars = { ...RESET_VARS, email: '<script>alert(1)</script>@x' };
    const r = await send({ to: ['ada@example.com'], template: 'password_reset', variables: vars, sync: true });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ sync: true, recipient_count: 1 });
    const [m] = arrived(sink, r.body.data.job_id); // already there: sync means accepted
    expect(m!.subject).toBe('Reset your Acme password');
    expect(m!.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;@x');
    expect(m!.html).not.toContain('<script>');
    expect(m!.html).toContain('href="https://acme.test/reset?token=t1&amp;x=&lt;y&gt;"');
    expect(m!.text).toContain('<script>alert(1)</script>@x');
    expect(m!.text).toContain('https://acme.test/reset?token=t1&x=<y>');
    expect(m!.text).toContain('expire in 30 minutes');
    expect((await job(s, key, r.body.data.job_id)).state).toBe('sent');
  });

  test("a request subject overrides the template's", async () => {
    const r = await send({
      to: ['ada@example.com'],
      template: 'verify_email',
      subject: 'Welcome aboard',
      variables: RESET_VARS,
      sync: true,
    });
    expect(r.status).toBe(200);
    expect(arrived(sink, r.body.data.job_id)[0]!.subject).toBe('Welcome aboard');
  });

  const invalid: {
    name: string;
    body: Record<string, unknown>;
    status?: number;
    code?: string;
    field?: string | RegExp;
  }[] = [
    { name: 'no recipients', body: { to: [], subject: 's', text: 't' }, field: 'to' },
    { name: 'to missing', body: { subject: 's', text: 't' }, field: 'to' },
    { name: 'to not an array', body: { to: 'ada@example.com', subject: 's', text: 't' }, field: 'to' },
    {
      name: 'more than mail.max_recipients',
      body: { to: ['a@x.io', 'b@x.io', 'c@x.io', 'd@x.io'], subject: 's', text: 't' },
      field: 'to',
    },
    { name: 'address without domain', body: { to: ['ada@'], subject: 's', text: 't' }, field: 'to.0' },
    {
      name: 'display name smuggling a second address',
      body: { to: ['a@x.io', 'Eve <eve@evil.io>, b@x.io'], subject: 's', text: 't' },
      field: 'to.1',
    },
    {
      name: 'address with a line break',
      body: { to: ['a@x.io\r\nBcc: eve@evil.io'], subject: 's', text: 't' },
      field: 'to.0',
    },
    {
      name: 'subject with CR/LF (header injection)',
      body: { to: ['a@x.io'], subject: 'Hi\r\nBcc: eve@evil.io', text: 't' },
      field: 'subject',
    },
    {
      name: 'subject longer than one header line',
      body: { to: ['a@x.io'], subject: 'x'.repeat(999), text: 't' },
      field: 'subject',
    },
    { name: 'no body at all', body: { to: ['a@x.io'], subject: 's' }, field: 'text' },
    { name: 'empty body', body: { to: ['a@x.io'], subject: 's', text: '' }, field: 'text' },
    { name: 'inline body without subject', body: { to: ['a@x.io'], text: 't' }, field: 'subject' },
    {
      name: 'template and inline body together',
      body: { to: ['a@x.io'], template: 'password_reset', variables: RESET_VARS, text: 't' },
      field: 'template',
    },
    {
      name: 'variables without a template',
      body: { to: ['a@x.io'], subject: 's', text: 't', variables: { a: 1 } },
      field: 'variables',
    },
    { name: 'unknown field', body: { to: ['a@x.io'], subject: 's', text: 't', tamplate: 'x' }, field: 'tamplate' },
    { name: 'sync not a boolean', body: { to: ['a@x.io'], subject: 's', text: 't', sync: 'yes' }, field: 'sync' },
    {
      name: 'idempotency_key not a UUID',
      body: { to: ['a@x.io'], subject: 's', text: 't', idempotency_key: 'abc' },
      field: 'idempotency_key',
    },
    { name: 'unknown template', body: { to: ['a@x.io'], template: 'nope' }, status: 404, code: 'template_not_found' },
    {
      name: 'variable the template uses is missing',
      body: { to: ['a@x.io'], template: 'password_reset', variables: { ...RESET_VARS, link: undefined } },
      field: 'variables.link',
    },
  ];
  test.each(invalid)('$name → 4xx naming the field, nothing sent', async ({
    name,
    body,
    status = 400,
    code = 'validation_error',
    field,
  }) => {
    const before = sink.messages.length;
    const jobsBefore = (await jobs()).length;
    const r = await send(body);
    expectBError(r, status, code);
    expect(r.body.errors[0].message.length).toBeGreaterThan(10);
    if (field) expect(Object.keys(r.body.errors[0].details.fields ?? {})).toContain(field as string);
    expect((await jobs()).length).toBe(jobsBefore);
    // Nothing sent, proven by what did arrive: a sync mail sent after the refusal is the only
    // message since (nothing earlier is in flight: every test before this one waited for its mail).
    const after = await send({ to: ['after@x.io'], subject: `after: ${name}`, text: 't', sync: true });
    expect(after.status).toBe(200);
    expect(sink.messages.slice(before).map((m) => m.subject)).toEqual([`after: ${name}`]);
  });

  test('every missing variable is named at once', async () => {
    const r = await send({ to: ['a@x.io'], template: 'verify_email', variables: { app_name: 'A' } });
    expect(r.status).toBe(400);
    expect(r.body.errors[0].details.missing_variables).toEqual(['email', 'expires_in_minutes', 'link', 'token']);
    expect(r.body.errors[0].message).toContain('email, expires_in_minutes, link, token');
  });

  test('a variable read only inside {% if %} / {% unless %} is optional; one read outside is still required', async () => {
    const put = await adminReq(s, a, 'PUT', '/api/admin/templates/coupon', {
      subject: 'Hello {{ name }}',
      text: 'Hi {{ name }}{% if coupon %}, your code is {{ coupon }}{% endif %}{% unless vip %}.{% endunless %}',
    });
    expect(put.status).toBe(200);
    // Sync, so both are delivered before the next test counts what the sink received.
    const without = await send({ to: ['a@x.io'], template: 'coupon', variables: { name: 'Ada' }, sync: true });
    expect(without.status).toBeLessThan(300);
    const withIt = await send({
      to: ['a@x.io'],
      template: 'coupon',
      variables: { name: 'Ada', coupon: 'X1', vip: true },
      sync: true,
    });
    expect(withIt.status).toBeLessThan(300);
    const missing = await send({ to: ['a@x.io'], template: 'coupon', variables: { coupon: 'X1' } });
    expect(missing.status).toBe(400);
    expect(missing.body.errors[0].details.missing_variables).toEqual(['name']);
    // What was delivered: the optional parts left out, then filled in.
    expect(arrived(sink, without.body.data.job_id).map((m) => m.text.trim())).toEqual(['Hi Ada.']);
    expect(arrived(sink, withIt.body.data.job_id).map((m) => m.text.trim())).toEqual(['Hi Ada, your code is X1']);
  });

  test('a variable carrying CR/LF into the subject is refused', async () => {
    const put = await adminReq(s, a, 'PUT', '/api/admin/templates/hello', {
      subject: 'Hello {{ name }}',
      text: 'Hi {{ name }}',
    });
    expect(put.status).toBe(200);
    const r = await send({ to: ['a@x.io'], template: 'hello', variables: { name: 'x\r\nBcc: eve@evil.io' } });
    expect(r.status).toBe(400);
    expect(r.body.errors[0].details.fields.subject).toContain('line breaks');
  });

  test('malformed JSON → 400, wrong content type → 415, body over 1 MB → 413 (format B)', async () => {
    const bad = await s.req('POST', '/api/v1/mail/send', {
      raw: '{"to": [',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
    });
    expectBError(bad, 400, 'invalid_json');
    const form = await s.req('POST', '/api/v1/mail/send', {
      raw: 'to=a@x.io',
      headers: { 'x-api-key': key, 'content-type': 'application/x-www-form-urlencoded' },
    });
    expectBError(form, 415, 'unsupported_media_type');
    const huge = await send({ to: ['a@x.io'], subject: 's', text: 'x'.repeat(1_100_000) });
    expectBError(huge, 413, 'payload_too_large');
  });

  test('permissions: key checked before the body; mail:send or mail:* needed', async () => {
    const good = { to: ['a@x.io'], subject: 's', text: 't' };
    const publicKey = await createKey(s, { type: 'public' });
    const dbKey = await createKey(s, {
      type: 'service',
      service: 'reports',
      permissions: ['db:query'],
      tables: ['orders'],
    });
    const star = await createKey(s, { type: 'service', service: 'crm', permissions: ['mail:*'] });
    const revoked = { key: await createKey(s, { type: 'service', service: 'old', permissions: ['mail:send'] }) };
    await revokeKey(s, revoked.key);
    const cases: { name: string; headers: Record<string, string>; body: unknown; status: number; code?: string }[] = [
      { name: 'no key', headers: {}, body: good, status: 401, code: 'unauthorized' },
      { name: 'no key and a bad body', headers: {}, body: { nope: 1 }, status: 401, code: 'unauthorized' },
      {
        name: 'unknown key',
        headers: { 'x-api-key': 'sk_' + 'x'.repeat(40) },
        body: good,
        status: 401,
        code: 'unauthorized',
      },
      { name: 'revoked key', headers: { 'x-api-key': revoked.key }, body: good, status: 401, code: 'unauthorized' },
      { name: 'public key', headers: { 'x-api-key': publicKey }, body: good, status: 403, code: 'forbidden' },
      {
        name: 'service key without mail permission',
        headers: { 'x-api-key': dbKey },
        body: good,
        status: 403,
        code: 'forbidden',
      },
      { name: 'mail:* key', headers: { 'x-api-key': star }, body: good, status: 202 },
    ];
    const accepted: string[] = [];
    for (const c of cases) {
      const r = await s.req('POST', '/api/v1/mail/send', { body: c.body, headers: c.headers });
      expect({ name: c.name, status: r.status, code: r.body.errors?.[0]?.code }).toEqual({
        name: c.name,
        status: c.status,
        code: c.code,
      });
      if (c.code) expectBError(r, c.status, c.code);
      else accepted.push(expectB(r, c.status).job_id);
    }
    // Out before the next test (no mail of this one left in flight there).
    for (const id of accepted) await waitState(s, star, id, 'sent');
  });

  test('a job is visible only to the key that created it', async () => {
    const r = await send({ to: ['a@x.io'], subject: 's', text: 't' });
    const id = r.body.data.job_id;
    const other = await createKey(s, { type: 'service', service: 'other', permissions: ['mail:send'] });
    expect((await s.req('GET', `/api/v1/mail/jobs/${id}`, { headers: { 'x-api-key': key } })).status).toBe(200);
    const foreign = await s.req('GET', `/api/v1/mail/jobs/${id}`, { headers: { 'x-api-key': other } });
    expectBError(foreign, 404, 'job_not_found');
    expect((await s.req('GET', `/api/v1/mail/jobs/not-a-uuid`, { headers: { 'x-api-key': key } })).status).toBe(404);
    expect(
      (await s.req('GET', `/api/v1/mail/jobs/${crypto.randomUUID()}`, { headers: { 'x-api-key': key } })).status,
    ).toBe(404);
    expect((await s.req('GET', `/api/v1/mail/jobs/${id}`)).status).toBe(401);
    // A key without mail permission is refused before the job is even looked up.
    const dbKey = await createKey(s, {
      type: 'service',
      service: 'reports2',
      permissions: ['db:query'],
      tables: ['orders'],
    });
    for (const k of [dbKey, await createKey(s, { type: 'public' })]) {
      const r403 = await s.req('GET', `/api/v1/mail/jobs/${id}`, { headers: { 'x-api-key': k } });
      expectBError(r403, 403, 'forbidden');
      expect(r403.text).not.toContain(id);
    }
    await waitState(s, key, id, 'sent');
  });

  test('sync send the server refuses → 502 mail_provider_error, job dead, nothing delivered', async () => {
    // Only mail to this recipient is refused: another still in flight cannot take the refusal.
    sink.refuse(1, 550, 'Mailbox unavailable', { to: 'refused@x.io' });
    const r = await send({ to: ['refused@x.io'], subject: 'refused', text: 't', sync: true });
    expectBError(r, 502, 'mail_provider_error');
    expect(r.body.errors[0].message).toContain('550');
    const listed = (await jobs('&state=dead')).find((j) => j.subject === 'refused');
    expect(arrived(sink, listed.id)).toHaveLength(0);
    // As its creator sees it.
    const dead = await job(s, key, listed.id);
    expect(dead).toMatchObject({ state: 'dead', attempts: 1, sync: true });
    expect(dead.last_error).toContain('550');
  });

  test('the OpenAPI document describes the Mail API', async () => {
    const doc = (await s.req('GET', '/api/openapi.json')).body;
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/api/v1/mail/send', '/api/v1/mail/jobs/{job_id}']));
    const op = doc.paths['/api/v1/mail/send'].post;
    expect(Object.keys(op.responses)).toEqual(
      expect.arrayContaining(['200', '202', '400', '401', '403', '404', '409', '422', '502', '503']),
    );
  });
});
