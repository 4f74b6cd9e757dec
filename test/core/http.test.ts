import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Elysia, t } from 'elysia';
import SwaggerParser from '@apidevtools/swagger-parser';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import type { RouteModule } from '../../src/app';
import { logServerError, reply, toAppError } from '../../src/http/foundation';
import { NO_AREA } from '../../src/http/areas';
import { DatabaseBusyError, DatabaseUnavailableError, WaitAbandonedError } from '../../src/db/engine';
import type { Logger } from '../../src/log';
import { createKey } from '../helpers/keys';
import pkg from '../../package.json';
import { expectA, expectAError, expectB, expectBError, replyOf } from '../helpers/envelopes';

/** Routes that exercise the foundation in each area's envelope. */
const probe: RouteModule = {
  name: 'probe',
  listener: 'public',
  routes: () =>
    new Elysia()
      .post('/api/v1/auth/_probe', ({ body, request }) => reply(request, { echo: body }), {
        body: t.Object({ email: t.String({ format: 'email' }), age: t.Integer({ minimum: 0 }) }),
      })
      .post('/api/v1/db/_probe', ({ body, request }) => reply(request, { echo: body }), {
        body: t.Object({ n: t.Integer() }),
      })
      .get('/api/v1/auth/_boom', () => {
        throw new Error('secret internals: password=hunter2');
      })
      // A handler whose answer breaks its own response schema (a server bug).
      .get('/api/v1/auth/_badshape', () => ({ success: true as const, data: { internal_column: 'x' } }) as never, {
        response: { 200: t.Object({ success: t.Literal(true), data: t.Object({ id: t.String() }) }) },
      })
      .get('/api/v1/db/_slow', async ({ request }) => {
        await Bun.sleep(400);
        return reply(request, { slow: true });
      }),
};
const mailProbe: RouteModule = {
  name: 'mail-probe',
  listener: 'main',
  routes: () =>
    new Elysia()
      .post('/api/v1/mail/_probe', ({ body, request }) => reply(request, { echo: body }), {
        body: t.Object({ to: t.Array(t.String(), { minItems: 1 }) }),
      })
      .get('/api/v1/mail/_boom', () => {
        throw new Error('internals');
      }),
};

describe.each(ENGINES)('HTTP foundation on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine, { extra: [probe, mailProbe], env: { BASALT_WEB_MAX_JSON_BODY_BYTES: '2048' } });
    await s.platform.settings.set('web.cors_origins', ['https://app.example']);
  });
  afterAll(() => s.stop());

  test('X-Request-Id is generated, or echoed when well-formed', async () => {
    const gen = await s.req('GET', '/healthz');
    expect(gen.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await s.req('GET', '/healthz', { headers: { 'x-request-id': 'req-42.abc' } });
    expect(echoed.headers.get('x-request-id')).toBe('req-42.abc');
    const hostile = await s.req('GET', '/healthz', { headers: { 'x-request-id': 'a b<script>' } });
    expect(hostile.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  const errors: [
    string,
    string,
    string,
    Record<string, unknown> | undefined,
    string | undefined,
    Record<string, string>,
    number,
    string,
  ][] = [
    // name, method, path, json body, raw body, headers, status, code
    ['unknown route in auth', 'GET', '/api/v1/auth/nope', undefined, undefined, {}, 404, 'not_found'],
    ['unknown route at root', 'GET', '/nope', undefined, undefined, {}, 404, 'not_found'],
    [
      'auth format error → 422 with fields',
      'POST',
      '/api/v1/auth/_probe',
      { email: 'x', age: -1 },
      undefined,
      {},
      422,
      'validation_error',
    ],
    ['db format error → 400', 'POST', '/api/v1/db/_probe', { n: 'x' }, undefined, {}, 400, 'validation_error'],
    [
      'malformed JSON → 400',
      'POST',
      '/api/v1/db/_probe',
      undefined,
      '{"n": 1',
      { 'content-type': 'application/json' },
      400,
      'invalid_json',
    ],
    [
      'wrong content type → 415',
      'POST',
      '/api/v1/db/_probe',
      undefined,
      'n=1',
      { 'content-type': 'application/x-www-form-urlencoded' },
      415,
      'unsupported_media_type',
    ],
    [
      'body over the limit → 413',
      'POST',
      '/api/v1/db/_probe',
      undefined,
      JSON.stringify({ n: 1, pad: 'x'.repeat(4000) }),
      { 'content-type': 'application/json' },
      413,
      'payload_too_large',
    ],
    [
      'thrown error → 500 without internals',
      'GET',
      '/api/v1/auth/_boom',
      undefined,
      undefined,
      {},
      500,
      'internal_error',
    ],
  ];
  test.each(errors)('%s (format A)', async (_n, method, path, body, raw, headers, status, code) => {
    const r = await s.req(method, path, { body, raw, headers });
    expectAError(r, status, code);
    expect(r.text).not.toMatch(/hunter2|stack|at .*\.ts|Elysia|ValidationError/);
  });

  test('a response that fails its own schema is 500 internal_error, cause logged, no fields shown', async () => {
    const logged: unknown[] = [];
    const original = s.platform.log.error;
    s.platform.log.error = (msg, fields) => void logged.push({ msg, ...fields });
    try {
      const r = await s.req('GET', '/api/v1/auth/_badshape');
      expectAError(r, 500, 'internal_error', {
        message: 'Internal error; the request id identifies it in the server log.',
      });
      expect(r.text).not.toMatch(/internal_column|validation|"id"/);
      expect(logged).toContainEqual(
        expect.objectContaining({ msg: 'request failed', path: '/api/v1/auth/_badshape', code: 'internal_error' }),
      );
    } finally {
      s.platform.log.error = original;
    }
  });

  test('validation details name each field', async () => {
    const r = await s.req('POST', '/api/v1/auth/_probe', { body: { email: 'x', age: -1 } });
    expect(Object.keys(r.body.error.details.fields).sort()).toEqual(['age', 'email']);
    expect(r.body.error.details.fields.email).toBe('must be a valid email');
    const missing = await s.req('POST', '/api/v1/auth/_probe', { body: { age: 3 } });
    expect(missing.body.error.details.fields).toEqual({ email: 'is required' });
    expect(missing.body.error.message).toBe('Invalid request: email: is required');
  });

  test('body without Content-Length is capped too', async () => {
    const big = JSON.stringify({ n: 1, pad: 'x'.repeat(5000) });
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < big.length; i += 500) c.enqueue(new TextEncoder().encode(big.slice(i, i + 500)));
        c.close();
      },
    });
    const res = await fetch(s.publicUrl + '/api/v1/db/_probe', {
      method: 'POST',
      body: stream,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(413);
    const ok = await fetch(s.publicUrl + '/api/v1/db/_probe', {
      method: 'POST',
      body: new Blob(['{"n":5}']).stream(),
      headers: { 'content-type': 'application/json' },
    });
    expectA(await replyOf(ok), 200, { echo: { n: 5 } });
  });

  describe('bodies on extension routes are capped at web.max_json_body_bytes (format B)', () => {
    const path = '/api/module/contact-form/submit';
    const big = { name: 'Ann', email: 'ann@example.com', message: 'x'.repeat(4000) };
    const form = (o: Record<string, string>) => new URLSearchParams(o).toString();
    const chunks = (text: string) =>
      new ReadableStream({
        start(c) {
          for (let i = 0; i < text.length; i += 500) c.enqueue(new TextEncoder().encode(text.slice(i, i + 500)));
          c.close();
        },
      });
    const post = (body: BodyInit, type: string) =>
      fetch(s.publicUrl + path, { method: 'POST', body, headers: { 'content-type': type } });
    const multipart = () => {
      const fd = new FormData();
      for (const [k, v] of Object.entries(big)) fd.set(k, v);
      return fd;
    };

    const over: [string, () => Promise<Response>][] = [
      ['JSON with Content-Length', () => post(JSON.stringify(big), 'application/json')],
      ['JSON chunked', () => post(chunks(JSON.stringify(big)), 'application/json')],
      ['urlencoded with Content-Length', () => post(form(big), 'application/x-www-form-urlencoded')],
      ['urlencoded chunked', () => post(chunks(form(big)), 'application/x-www-form-urlencoded')],
      ['multipart', () => fetch(s.publicUrl + path, { method: 'POST', body: multipart() })],
      ['no content type, chunked', () => fetch(s.publicUrl + path, { method: 'POST', body: chunks('z'.repeat(5000)) })],
    ];
    test.each(over)('%s over the limit → 413', async (_n, send) => {
      const res = await send();
      expectBError(await replyOf(res), 413, 'payload_too_large', {
        message: 'The request body is larger than 2048 bytes.',
      });
    });

    test('a small body, chunked or not, reaches the route intact', async () => {
      const small = { name: 'Ann', email: 'ann@example.com', message: 'hello' };
      // The form has no recipient in this test: 503 not_configured comes after the body validated.
      for (const res of [
        await post(chunks(form(small)), 'application/x-www-form-urlencoded'),
        await post(JSON.stringify(small), 'application/json'),
        await post(chunks(JSON.stringify(small)), 'application/json'),
      ]) {
        expectBError(await replyOf(res), 503, 'not_configured');
      }
      const invalid = await post(
        chunks(form({ name: 'Ann', email: 'nope', message: 'hi' })),
        'application/x-www-form-urlencoded',
      );
      const refused = await replyOf(invalid);
      expectBError(refused, 400, 'validation_error');
      expect(refused.body.errors[0].details.fields.email).toBe('must be a valid email');
    });

    test('Files uploads are not capped by this limit (the module enforces files.max_bytes)', async () => {
      const key = await createKey(s, { permissions: ['files:upload'] });
      const fd = new FormData();
      fd.set('file', new Blob(['a'.repeat(10_000)], { type: 'text/plain' }), 'big.txt');
      const res = await fetch(s.url + '/api/v1/files', { method: 'POST', body: fd, headers: { 'x-api-key': key } });
      expect(res.status).toBe(201);
      expect(((await res.json()) as any).file.size).toBe(10_000);
    });
  });

  test('format B errors and success carry meta.trace_id = X-Request-Id', async () => {
    const bad = await s.req('POST', '/api/v1/mail/_probe', { body: { to: [] } });
    expectBError(bad, 400, 'validation_error');
    expect(bad.body.meta.trace_id).toBe(bad.headers.get('x-request-id'));
    const ok = await s.req('POST', '/api/v1/mail/_probe', {
      body: { to: ['a@example.com'] },
      headers: { 'x-request-id': 'trace-1' },
    });
    expectB(ok, 200, { echo: { to: ['a@example.com'] } });
    expect(ok.body.meta.trace_id).toBe('trace-1');
    const boom = await s.req('GET', '/api/v1/mail/_boom');
    expectBError(boom, 500, 'internal_error');
    const missing = await s.req('GET', '/api/module/nothing-here/x');
    expectBError(missing, 404, 'not_found');
  });

  test('CORS: exact origin match, preflight, and live changes', async () => {
    const allowed = await s.req('GET', '/api/v1/public/runtime-config', { headers: { origin: 'https://app.example' } });
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(allowed.headers.get('access-control-expose-headers')).toContain('X-Request-Id');
    for (const origin of ['https://evil.example', 'https://app.example.evil.com', 'http://app.example', 'null']) {
      const r = await s.req('GET', '/api/v1/public/runtime-config', { headers: { origin } });
      expect(r.headers.get('access-control-allow-origin')).toBeNull();
    }
    const pre = await fetch(s.publicUrl + '/api/v1/db/query', {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type, x-api-key',
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
    expect(pre.headers.get('access-control-allow-headers')).toBe('content-type, x-api-key');
    await s.platform.settings.set('web.cors_origins', ['https://other.example']);
    try {
      const after = await s.req('GET', '/api/v1/public/runtime-config', { headers: { origin: 'https://app.example' } });
      expect(after.headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await s.platform.settings.set('web.cors_origins', ['https://app.example']);
    }
  });

  test('runtime config answers format A and never a secret', async () => {
    await s.platform.settings.set('mail.smtp_url', 'smtp://user:s3cr3t-pass@127.0.0.1:2525');
    try {
      const r = await s.req('GET', '/api/v1/public/runtime-config');
      expect(r.status).toBe(200);
      expect(r.body.data).toMatchObject({
        app_name: 'Basalt',
        access_mode: 'open',
        password_policy: { min_length: 8, max_length: 1024 },
      });
      expect(r.text).not.toContain('s3cr3t-pass');
      expect(r.text).not.toMatch(/smtp|jwt|secret|database/i);
    } finally {
      await s.platform.settings.unset('mail.smtp_url');
    }
  });

  test('OpenAPI document is valid 3.x with the package version', async () => {
    const r = await s.req('GET', '/api/openapi.json');
    expect(r.status).toBe(200);
    expect(r.body.openapi).toMatch(/^3\./);
    expect(r.body.info.version).toBe(pkg.version);
    expect(Object.keys(r.body.paths)).toContain('/api/v1/public/runtime-config');
    for (const p of Object.keys(r.body.paths)) expect(p).not.toMatch(/^\/(healthz|readyz|api\/admin)/);
    await SwaggerParser.validate(structuredClone(r.body));
  });

  test('API reference page is served with its own assets, no CDN', async () => {
    const page = await s.req('GET', '/api/docs');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    const refs = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThanOrEqual(3);
    for (const ref of refs) {
      expect(ref.startsWith('/api/docs/assets/')).toBe(true);
      const asset = await fetch(s.publicUrl + ref);
      expect(asset.status).toBe(200);
      expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(10);
    }
  });

  test('/metrics counts requests by area and status (Prometheus text)', async () => {
    await s.req('GET', '/api/v1/auth/nope');
    await s.req('GET', '/api/v1/auth/nope');
    const r = await fetch(s.url + '/metrics');
    expect(r.headers.get('content-type')).toContain('text/plain');
    const text = await r.text();
    const count = Number(/basalt_http_requests_total\{area="auth",method="GET",status="404"\} (\d+)/.exec(text)?.[1]);
    expect(count).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/basalt_http_request_duration_ms_count\{area="auth"\} \d+/);
    expect(text).toMatch(/^basalt_process_resident_memory_bytes \d+$/m);
    expect(text).not.toContain('/api/v1/auth/nope');
  });

  test('graceful stop lets an in-flight request finish', async () => {
    const other = await startServer(engine, { extra: [probe] });
    const inflight = fetch(other.publicUrl + '/api/v1/db/_slow');
    await Bun.sleep(100);
    const stopping = other.stop();
    const res = await inflight;
    expectA(await replyOf(res), 200, { slow: true });
    await stopping;
    await expect(fetch(other.publicUrl + '/healthz')).rejects.toThrow();
  });

  test('a hung request is cut after web.shutdown_timeout_ms and the stop completes', async () => {
    let release!: () => void;
    const hang = new Promise<void>((r) => (release = r));
    const hung: RouteModule = {
      name: 'hung',
      listener: 'public',
      routes: () => new Elysia().get('/api/v1/db/_hang', () => hang.then(() => 'late')),
    };
    const other = await startServer(engine, { extra: [hung], env: { BASALT_WEB_SHUTDOWN_TIMEOUT_MS: '300' } });
    try {
      const inflight = fetch(other.publicUrl + '/api/v1/db/_hang').then(
        (r) => r.status,
        () => 'cut',
      );
      await Bun.sleep(100);
      const t0 = performance.now();
      await other.stop();
      const took = performance.now() - t0;
      expect(took).toBeGreaterThanOrEqual(280);
      expect(took).toBeLessThan(3000);
      expect(await inflight).toBe('cut');
      // The shutdown steps ran: the database is closed.
      await expect(other.platform.db.query('SELECT 1')).rejects.toThrow();
    } finally {
      release();
    }
  });
});

describe('listeners', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer('embedded', { env: { BASALT_WEB_PUBLIC_API_SEPARATE: 'true' } });
  });
  afterAll(() => s.stop());

  const table: [string, 'main' | 'public', number][] = [
    ['/api/v1/public/runtime-config', 'public', 200],
    ['/api/v1/public/runtime-config', 'main', 404],
    ['/healthz', 'main', 200],
    ['/healthz', 'public', 404],
    ['/readyz', 'public', 404],
    ['/metrics', 'main', 200],
    ['/metrics', 'public', 404],
    ['/api/openapi.json', 'main', 200],
    ['/api/openapi.json', 'public', 200],
    ['/api/docs', 'public', 200],
  ];
  test.each(table)('%s on the %s listener → %d', async (path, which, status) => {
    expect(s.publicUrl).not.toBe(s.url);
    const r = await s.req('GET', path, { base: which === 'main' ? s.url : s.publicUrl });
    expect(r.status).toBe(status);
    if (status === 404) expect(r.body.success).toBe(false);
  });

  test('runtime config publishes both listeners: the public API base and the main one (mail, files)', async () => {
    const r = await s.req('GET', '/api/v1/public/runtime-config');
    expect(r.body.data).toMatchObject({
      public_api_separate: true,
      api_base_url: s.publicUrl + '/api',
      main_api_base_url: s.url + '/api',
    });
    // The published base really reaches mail and files (401 from their guards, not 404).
    const mail = await fetch(r.body.data.main_api_base_url + '/v1/mail/send', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expectBError(await replyOf(mail), 401, 'unauthorized');
    expect((await fetch(r.body.data.main_api_base_url + '/v1/files')).status).toBe(401);
    expect((await fetch(r.body.data.api_base_url + '/v1/mail/send', { method: 'POST' })).status).toBe(404);
    await s.platform.settings.set('web.main_base_url', 'https://admin.example.com/');
    await s.platform.settings.set('web.public_base_url', 'https://api.example.com');
    try {
      const behindProxy = await s.req('GET', '/api/v1/public/runtime-config');
      expect(behindProxy.body.data).toMatchObject({
        api_base_url: 'https://api.example.com/api',
        main_api_base_url: 'https://admin.example.com/api',
      });
    } finally {
      await s.platform.settings.unset('web.main_base_url');
      await s.platform.settings.unset('web.public_base_url');
    }
  });

  test('one listener serves everything when the split is off', async () => {
    const one = await startServer('embedded');
    try {
      expect(one.running.public).toBeUndefined();
      expect((await one.req('GET', '/healthz', { base: one.url })).status).toBe(200);
      const rc = await one.req('GET', '/api/v1/public/runtime-config', { base: one.url });
      expect(rc.status).toBe(200);
      expect(rc.body.data).toMatchObject({
        public_api_separate: false,
        api_base_url: one.url + '/api',
        main_api_base_url: one.url + '/api',
      });
    } finally {
      await one.stop();
    }
  });
});

describe('the log line of a 5xx', () => {
  /** A logger that keeps each line with its level. */
  const capture = () => {
    const lines: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
    const at =
      (level: string) =>
      (msg: string, fields: Record<string, unknown> = {}) =>
        void lines.push({ level, msg, fields });
    const log: Logger = {
      debug: at('debug'),
      info: at('info'),
      warn: at('warn'),
      error: at('error'),
      child: () => log,
      enabled: () => true,
    };
    return { log, lines };
  };
  const logged = (thrown: unknown) => {
    const { log, lines } = capture();
    logServerError(log, toAppError(thrown, NO_AREA), thrown, { request_id: 'r1', path: '/p' });
    return lines.map((l) => [l.level, l.msg, 'cause' in l.fields, l.fields.code]);
  };

  test('a failure is an error with its cause; a busy database a warning; a client gone while waiting an info line', () => {
    expect(logged(new TypeError('boom'))).toEqual([['error', 'request failed', true, 'internal_error']]);
    expect(logged(new DatabaseUnavailableError('no route to host'))).toEqual([
      ['error', 'request failed', true, 'database_unavailable'],
    ]);
    expect(logged(new DatabaseBusyError(2))).toEqual([
      ['warn', 'request answered with an error', false, 'database_busy'],
    ]);
    expect(logged(new WaitAbandonedError())).toEqual([
      ['info', 'client went away while waiting for the database', false, undefined],
    ]);
  });
});
