/**
 * The listener's per-request wrapper (src/http/server.ts) without a database: the
 * request log line and what it carries, the client address worked out on demand,
 * the path taken from the URL without a URL object, and the metrics counters.
 */
import { describe, expect, test } from 'bun:test';
import { createHandler } from '../../src/http/server';
import { areas } from '../../src/app';
import { pathOf } from '../../src/http/envelope';
import { Metrics } from '../../src/http/metrics';
import { requestInfo } from '../../src/http/request-info';
import { createLogger, type Level, type Logger } from '../../src/log';
import type { Settings } from '../../src/config/settings';

const values: Record<string, unknown> = {
  'web.trusted_proxies': ['10.0.0.1'],
  'web.cors_origins': ['https://app.example'],
  'web.max_json_body_bytes': 1000,
};
const settings = { get: (k: string) => values[k] } as unknown as Settings;

/** A logger that records lines instead of writing them. */
function recorder(level: Level) {
  const lines: { msg: string; fields?: Record<string, unknown> }[] = [];
  const real = createLogger(() => level);
  const log: Logger = {
    debug: (msg, fields) => void (real.enabled('debug') && lines.push({ msg, fields })),
    info: (msg, fields) => void (real.enabled('info') && lines.push({ msg, fields })),
    warn: (msg, fields) => void (real.enabled('warn') && lines.push({ msg, fields })),
    error: (msg, fields) => void lines.push({ msg, fields }),
    child: () => log,
    enabled: (l) => real.enabled(l),
  };
  return { log, lines };
}

/** Stands in for Bun's server: counts how often the socket peer is asked for. */
function peer(address: string) {
  const server = {
    asked: 0,
    requestIP: () => {
      server.asked++;
      return { address, family: 'IPv4', port: 1 };
    },
  };
  return server;
}

const json = (body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body);
  return new Request('http://127.0.0.1:3000/api/v1/db/query?x=1', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': String(text.length), ...headers },
    body: text,
  });
};

describe('request wrapper', () => {
  test('at info level every request has its log line, with the client address behind a trusted proxy', async () => {
    const { log, lines } = recorder('info');
    const h = createHandler({
      settings,
      log,
      areas,
      handle: async () => new Response('{}', { headers: { 'content-type': 'application/json' } }),
      metrics: new Metrics(),
    });
    const server = peer('10.0.0.1');
    const res = await h(json({ a: 1 }, { 'x-forwarded-for': '203.0.113.9', 'x-request-id': 'req-1' }), server as never);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('req-1');
    expect(lines).toHaveLength(1);
    expect(lines[0]!.msg).toBe('request');
    expect(lines[0]!.fields).toMatchObject({
      request_id: 'req-1',
      method: 'POST',
      path: '/api/v1/db/query',
      status: 200,
      ip: '203.0.113.9',
    });
    expect(typeof lines[0]!.fields!.ms).toBe('number');
  });

  test('below info level no line is built and the socket is not asked for its peer', async () => {
    const { log, lines } = recorder('warn');
    const h = createHandler({ settings, log, areas, handle: async () => new Response('{}'), metrics: new Metrics() });
    const server = peer('127.0.0.1');
    const res = await h(json({ a: 1 }), server as never);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(lines).toHaveLength(0);
    expect(server.asked).toBe(0);
  });

  test('a handler that asks for the client address gets it, and the socket is asked once', async () => {
    const { log } = recorder('info');
    const seen: string[] = [];
    const h = createHandler({
      settings,
      log,
      areas,
      handle: async (req) => {
        seen.push(requestInfo(req).ip, requestInfo(req).ip);
        return new Response('{}');
      },
    });
    const server = peer('::ffff:192.0.2.7');
    await h(json({}), server as never);
    expect(seen).toEqual(['192.0.2.7', '192.0.2.7']);
    expect(server.asked).toBe(1);
  });

  test('415 and 413 still answer in the envelope, with the request id and a log line', async () => {
    const { log, lines } = recorder('info');
    const h = createHandler({ settings, log, areas, handle: async () => new Response('{}') });
    const wrongType = await h(
      new Request('http://h/api/v1/db/query', {
        method: 'POST',
        headers: { 'content-type': 'text/plain', 'content-length': '2' },
        body: 'hi',
      }),
      peer('127.0.0.1') as never,
    );
    expect(wrongType.status).toBe(415);
    expect(wrongType.headers.get('x-request-id')).toBeTruthy();
    const big = 'x'.repeat(2000);
    const tooBig = await h(
      new Request('http://h/api/v1/db/query', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': String(big.length) },
        body: big,
      }),
      peer('127.0.0.1') as never,
    );
    expect(tooBig.status).toBe(413);
    expect(((await tooBig.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    expect(lines.map((l) => l.fields!.status)).toEqual([415, 413]);
  });

  test('a preflight from an origin outside web.cors_origins is logged, naming the setting, once a minute per origin', async () => {
    const { log, lines } = recorder('warn');
    const h = createHandler({ settings, log, areas, handle: async () => new Response('{}') });
    const preflight = (origin: string) =>
      new Request('http://127.0.0.1:3000/api/v1/db/query', {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST' },
      });
    for (const origin of [
      'https://app.example',
      'http://localhost:5173',
      'http://localhost:5173',
      'https://b.example',
    ]) {
      const res = await h(preflight(origin), peer('127.0.0.1') as never);
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe(origin === 'https://app.example' ? origin : null);
    }
    const refused = lines.filter((l) => l.msg === 'CORS preflight refused: origin not in web.cors_origins');
    expect(refused.map((l) => [l.fields!.origin, l.fields!.setting])).toEqual([
      ['http://localhost:5173', 'web.cors_origins'],
      ['https://b.example', 'web.cors_origins'],
    ]);
  });

  test('CORS headers for an allowed origin', async () => {
    const { log } = recorder('silent');
    const h = createHandler({ settings, log, areas, handle: async () => new Response('{}') });
    const res = await h(json({}, { origin: 'https://app.example' }), peer('127.0.0.1') as never);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(res.headers.get('vary')).toContain('Origin');
  });

  test('a body read by the listener is handed on as the same bytes, to any reader', async () => {
    const { log } = recorder('warn');
    const body = { text: 'héllo', n: [1, 2, 3] };
    const text = JSON.stringify(body);
    // Each reader on a request of its own: a handed-on request is an ordinary one, read once.
    const readers: ((r: Request) => Promise<unknown>)[] = [
      (r) => r.text(),
      (r) => r.json(),
      async (r) => new TextDecoder().decode(await r.arrayBuffer()),
      async (r) => new TextDecoder().decode(await r.bytes()),
      async (r) => (await r.blob()).text(),
      (r) => r.clone().text(),
      (r) => new Response(r.body).text(),
    ];
    let seen: unknown;
    // With a Content-Length, and chunked (no length: the listener counts it as it reads).
    const requests = () => [
      json(body),
      new Request('http://127.0.0.1:3000/api/v1/db/query', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: new Blob([text]).stream(),
      }),
    ];
    for (const read of readers) {
      const h = createHandler({
        settings,
        log,
        areas,
        handle: async (req) => {
          seen = await read(req);
          return new Response('{}');
        },
      });
      for (const req of requests()) {
        seen = undefined;
        expect((await h(req, peer('127.0.0.1') as never)).status).toBe(200);
        expect(seen).toEqual(read === readers[1] ? body : text);
      }
    }
    // A malformed body still reaches the parser, which refuses it (400 invalid_json in the app).
    const bad = createHandler({ settings, log, areas, handle: async (req) => Response.json(await req.json()) });
    const r = new Request('http://127.0.0.1:3000/api/v1/db/query', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': '4' },
      body: '{bad',
    });
    expect((await bad(r, peer('127.0.0.1') as never)).status).toBe(500);
  });
});

describe('pathOf', () => {
  test.each([
    ['http://h/api/v1/db/query', '/api/v1/db/query'],
    ['http://h:3000/api/v1/db/query?x=1&y=/z', '/api/v1/db/query'],
    ['http://h/a/b#frag?x', '/a/b'],
    ['http://h/a?q#f', '/a'],
    ['http://h', '/'],
    ['http://h/', '/'],
    ['http://[::1]:80//x/y', '//x/y'],
  ])('%s → %s', (url, path) => {
    expect(pathOf(url)).toBe(path);
    if (url !== 'http://h') expect(pathOf(url)).toBe(new URL(url).pathname);
  });
});

describe('metrics', () => {
  test('counts per area, method and status; one series per combination', () => {
    const m = new Metrics();
    const area = (path: string) => areas.of(path).name;
    for (let i = 0; i < 3; i++) m.observe(area('/api/v1/db/query'), 'POST', 200, 2);
    m.observe(area('/api/v1/db/query'), 'POST', 400, 2);
    m.observe(area('/api/v1/auth/login'), 'VERYLONGMETHOD', 200, 30);
    const text = m.render();
    expect(text).toContain('basalt_http_requests_total{area="db",method="POST",status="200"} 3\n');
    expect(text).toContain('basalt_http_requests_total{area="db",method="POST",status="400"} 1\n');
    expect(text).toContain('basalt_http_requests_total{area="auth",method="OTHER",status="200"} 1\n');
    expect(text.match(/area="db",method="POST",status="200"/g)).toHaveLength(1);
    expect(text).toContain('basalt_http_request_duration_ms_count{area="db"} 4\n');
  });
});

describe('logger', () => {
  test('enabled() follows the live level', () => {
    let level: Level = 'info';
    const log = createLogger(() => level);
    expect(log.enabled('info')).toBe(true);
    expect(log.enabled('debug')).toBe(false);
    level = 'error';
    expect(log.enabled('warn')).toBe(false);
    expect(log.enabled('error')).toBe(true);
    level = 'silent';
    expect(log.enabled('error')).toBe(false);
  });
});

describe('log lines', () => {
  /** The lines `fn` writes to stdout and stderr. */
  function capture(fn: () => void): string[] {
    const out: string[] = [];
    const [o, e] = [process.stdout.write, process.stderr.write];
    process.stdout.write = process.stderr.write = ((chunk: string) => {
      out.push(String(chunk));
      return true;
    }) as never;
    try {
      fn();
    } finally {
      [process.stdout.write, process.stderr.write] = [o, e];
    }
    return out.map((l) => l.trimEnd());
  }

  test('plain fields, errors (also nested) and bigints are all written as JSON', () => {
    const log = createLogger(() => 'info').child({ extension: 'x' });
    const [plain, failed, nested, big] = capture(() => {
      log.info('request', { request_id: 'r', status: 200, ms: 1.5, ok: true, none: null });
      log.error('request failed', { cause: new TypeError('boom') });
      log.warn('wrapped', { detail: { cause: new Error('inner') } });
      log.info('count', { n: 12345678901234567890n });
    });
    expect(JSON.parse(plain!)).toMatchObject({
      level: 'info',
      msg: 'request',
      extension: 'x',
      request_id: 'r',
      status: 200,
      ms: 1.5,
      ok: true,
      none: null,
    });
    expect(JSON.parse(failed!).cause).toMatchObject({ name: 'TypeError', message: 'boom' });
    expect(JSON.parse(nested!).detail.cause).toMatchObject({ name: 'Error', message: 'inner' });
    expect(JSON.parse(big!).n).toBe('12345678901234567890');
  });
});
