/**
 * CORS variants (docs/operations.md, CORS): an allowed origin gets its exact origin back
 * with credentials, on answers and errors of every area; every other spelling — a
 * suffix or prefix lookalike, another scheme or port, `null`, a list, a wildcard — gets
 * no CORS headers at all; preflights with odd methods and headers never widen the
 * allowed methods; nothing ever answers `*`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';

const ALLOWED = ['https://app.example', 'http://localhost:3000'];

const FOREIGN = [
  'https://evil.example',
  'https://app.example.evil.com',
  'https://evilapp.example',
  'https://app.xn--exampl-6ve', // an IDN lookalike, as a browser sends it
  'http://app.example',
  'https://app.example:8443',
  'https://APP.EXAMPLE',
  'https://app.example/',
  'https://app.example/path',
  'null',
  '*',
  'https://app.example, https://evil.example',
  'https://app.example https://evil.example',
  'file://',
  'http://localhost:3000.evil.com',
  'http://localhost',
  'http://127.0.0.1:3000',
  'https://app.example.',
];

/** Requests of each area, answered with success or an error in its envelope. */
const ROUTES: [string, string, string, unknown][] = [
  ['runtime config', 'GET', '/api/v1/public/runtime-config', undefined],
  ['auth error', 'POST', '/api/v1/auth/login', { email: 'nobody@example.com', password: 'wrong password' }],
  ['Database API error', 'POST', '/api/v1/db/query', { entity: 'x', action: 'select' }],
  ['mail error', 'POST', '/api/v1/mail/send', {}],
  ['files error', 'GET', '/api/v1/files', undefined],
  ['unknown path', 'GET', '/api/v1/nope', undefined],
  ['health', 'GET', '/healthz', undefined],
];

function expectNoCors(h: Headers): void {
  for (const name of [
    'access-control-allow-origin',
    'access-control-allow-credentials',
    'access-control-expose-headers',
    'access-control-allow-methods',
    'access-control-allow-headers',
  ]) {
    expect(h.get(name)).toBeNull();
  }
}

describe.each(ENGINES)('CORS on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine);
    await s.settings.set('web.cors_origins', ALLOWED);
  });
  afterAll(() => s.stop());

  describe.each(ROUTES)('%s', (_name, method, path, body) => {
    test.each(ALLOWED)('allowed origin %s: exact origin, credentials, exposed headers', async (origin) => {
      const r = await s.req(method, path, { body, headers: { origin } });
      expect(r.headers.get('access-control-allow-origin')).toBe(origin);
      expect(r.headers.get('access-control-allow-credentials')).toBe('true');
      expect(r.headers.get('access-control-expose-headers')).toContain('X-Request-Id');
      expect(r.headers.get('vary')).toContain('Origin');
    });

    test.each(FOREIGN)('origin %j: no CORS headers, Vary: Origin', async (origin) => {
      const r = await s.req(method, path, { body, headers: { origin } });
      expectNoCors(r.headers);
      expect(r.headers.get('vary') ?? '').toContain('Origin');
    });
  });

  test('no Origin header: no CORS headers', async () => {
    const r = await s.req('GET', '/api/v1/public/runtime-config');
    expectNoCors(r.headers);
  });

  const preflight = (origin: string, method: string, headers?: string, path = '/api/v1/db/query') =>
    fetch(s.publicUrl + path, {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': method,
        ...(headers ? { 'access-control-request-headers': headers } : {}),
      },
    });

  test.each([
    ['POST', 'content-type, x-api-key'],
    ['PUT', 'authorization'],
    ['DELETE', undefined],
    ['PATCH', 'content-type, authorization, x-api-key, idempotency-key, x-request-id'],
    ['PROPFIND', 'x-custom-header'],
    ['TRACE', 'content-type'],
    ['CONNECT', undefined],
    ['post', 'CONTENT-TYPE'],
    ['GET, POST', 'a, b, c'],
  ])('preflight %s with headers %j from an allowed origin', async (method, headers) => {
    const res = await preflight(ALLOWED[0]!, method, headers);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(ALLOWED[0]!);
    expect(res.headers.get('access-control-allow-credentials')).toBe('true');
    const methods = res.headers
      .get('access-control-allow-methods')!
      .split(',')
      .map((m) => m.trim());
    expect(methods).toEqual(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
    expect(res.headers.get('access-control-allow-methods')).not.toContain('*');
    expect(res.headers.get('access-control-allow-origin')).not.toBe('*');
    expect(Number(res.headers.get('access-control-max-age'))).toBeGreaterThan(0);
  });

  test.each(FOREIGN)('preflight from %j: 204 and nothing allowed', async (origin) => {
    const res = await preflight(origin, 'POST', 'content-type, x-api-key');
    expect(res.status).toBe(204);
    expectNoCors(res.headers);
  });

  test('preflight on any path, the unknown and the main-only included, answers alike', async () => {
    for (const path of ['/api/v1/nope', '/api/v1/mail/send', '/healthz', '/api/docs']) {
      const res = await preflight(ALLOWED[1]!, 'POST', undefined, path);
      expect([res.status, res.headers.get('access-control-allow-origin')]).toEqual([204, ALLOWED[1]!]);
      const foreign = await preflight('https://evil.example', 'POST', undefined, path);
      expect(foreign.status).toBe(204);
      expectNoCors(foreign.headers);
    }
  });

  test('OPTIONS without Access-Control-Request-Method is not a preflight', async () => {
    const res = await fetch(s.publicUrl + '/api/v1/db/query', {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example' },
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expectNoCors(res.headers);
  });

  test('a foreign origin is still answered (CORS binds browsers, not servers), without CORS headers', async () => {
    const r = await s.req('GET', '/api/v1/public/runtime-config', { headers: { origin: 'https://evil.example' } });
    expect(r.status).toBe(200);
    expectNoCors(r.headers);
  });

  test('TRACE never echoes the request', async () => {
    const res = await fetch(s.publicUrl + '/api/v1/public/runtime-config', {
      method: 'TRACE',
      headers: { origin: ALLOWED[0]!, authorization: 'Bearer secret-token-value' },
    }).catch(() => undefined);
    if (res) {
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(await res.text()).not.toContain('secret-token-value');
    }
  });

  test('an empty allow-list sends no CORS headers to anyone', async () => {
    await s.settings.set('web.cors_origins', []);
    try {
      for (const origin of ALLOWED) {
        expectNoCors((await s.req('GET', '/api/v1/public/runtime-config', { headers: { origin } })).headers);
        expectNoCors((await preflight(origin, 'POST')).headers);
      }
    } finally {
      await s.settings.set('web.cors_origins', ALLOWED);
    }
  });
});
