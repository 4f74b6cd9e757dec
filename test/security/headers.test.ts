/**
 * Security headers by area (docs/operations.md, Security headers): every response
 * carries nosniff, a framing policy, a CSP and a referrer policy; answers carrying
 * tokens or secrets are `no-store`; a header a route sets itself is kept (Files
 * downloads, the admin panel, an extension's page). The reference page still works
 * under its CSP in a real browser. The extension's page is a small extension of this suite's,
 * loaded beside the repository's media-library (the Files API).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import { PASSWORD, call, email, startAuthServer } from '../auth/support';
import { registerUser } from '../helpers/users';
import { extensionsDir, REPO_EXTENSIONS, upload } from '../extensions/support';
import { rawRequest, requestText } from './raw-http';

const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** A page served by an extension with its own policy: the platform must not touch it. */
const OWN = {
  'content-security-policy': "default-src 'self'",
  'referrer-policy': 'same-origin',
  'x-frame-options': 'SAMEORIGIN',
  'cache-control': 'public, max-age=60',
};
const OWN_HEADERS = `
import { defineExtension } from 'basalt';
export default defineExtension({ name: 'own-headers', version: '1.0.0', setup(ctx) {
  ctx.routes.get('/page', () => new Response('<p>hi</p>', { headers: { 'content-type': 'text/html', ...${JSON.stringify(OWN)} } }));
} });
`;

function expectBaseline(h: Headers, csp = API_CSP): void {
  expect(h.get('x-content-type-options')).toBe('nosniff');
  expect(h.get('x-frame-options')).toBe('DENY');
  expect(h.get('referrer-policy')).toBe('no-referrer');
  expect(h.get('content-security-policy')).toBe(csp);
}

describe.each(ENGINES)('security headers on %s', (engine) => {
  let s: TestServer;
  let key: string;
  beforeAll(async () => {
    const extensions = extensionsDir({ 'own-headers/index.ts': OWN_HEADERS });
    cpSync(join(REPO_EXTENSIONS, 'media-library'), join(extensions, 'media-library'), { recursive: true });
    s = await startAuthServer(engine, {
      env: { BASALT_EXTENSIONS_DIR: extensions },
      migrations: { '001_things.sql': 'CREATE TABLE public.things (id serial PRIMARY KEY, name text)' },
    });
    key = await createKey(s, { permissions: ['db:query', 'files:*'], tables: ['things'] });
  });
  afterAll(() => s.stop());

  test.each([
    ['runtime config', 'GET', '/api/v1/public/runtime-config', undefined, 200],
    ['health', 'GET', '/healthz', undefined, 200],
    ['readiness', 'GET', '/readyz', undefined, 200],
    ['OpenAPI document', 'GET', '/api/openapi.json', undefined, 200],
    ['unknown path', 'GET', '/nope', undefined, 404],
    ['unknown API path', 'POST', '/api/v1/nope', {}, 404],
    ['mail without a key (format B error)', 'POST', '/api/v1/mail/send', {}, 401],
    ['files list without credentials (format C error)', 'GET', '/api/v1/files', undefined, 401],
    ['malformed JSON', 'POST', '/api/v1/auth/login', undefined, 400],
  ] as const)('%s: the API set', async (_name, method, path, body, status) => {
    const r =
      path === '/api/v1/auth/login'
        ? await s.req(method, path, { raw: '{"email":', headers: { 'content-type': 'application/json' } })
        : await s.req(method, path, { body });
    expect(r.status).toBe(status);
    expectBaseline(r.headers);
    if (!path.startsWith('/api/v1/auth')) expect(r.headers.get('cache-control') ?? '').not.toContain('no-store');
  });

  test('Public Auth: every answer is no-store, the ones carrying tokens first of all', async () => {
    const address = email('headers');
    const reg = await registerUser(s, { email: address });
    expect(reg.headers.get('cache-control')).toBe('no-store');
    expectBaseline(reg.headers);
    const login = await call(s, { path: 'login', body: { email: address, password: PASSWORD } });
    expect([login.status, login.headers.get('cache-control')]).toEqual([200, 'no-store']);
    const refresh = await call(s, { path: 'refresh', body: { refresh_token: login.body.data.refresh_token } });
    expect([refresh.status, refresh.headers.get('cache-control')]).toEqual([200, 'no-store']);
    const me = await call(s, { method: 'GET', path: 'me', token: refresh.body.data.access_token });
    expect([me.status, me.headers.get('cache-control')]).toEqual([200, 'no-store']);
    const wrong = await call(s, { path: 'login', body: { email: address, password: 'wrong password' } });
    expect([wrong.status, wrong.headers.get('cache-control')]).toEqual([401, 'no-store']);
    expectBaseline(wrong.headers);
  });

  test('the Database API is no-store (private rows, transaction ids)', async () => {
    const q = await s.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': key },
      body: { entity: 'things', action: 'select' },
    });
    expect([q.status, q.headers.get('cache-control')]).toEqual([200, 'no-store']);
    expectBaseline(q.headers);
    const begin = await s.req('POST', '/api/v1/db/transaction/begin', { headers: { 'x-api-key': key }, body: {} });
    expect([begin.status, begin.headers.get('cache-control')]).toEqual([200, 'no-store']);
    await s.req('POST', `/api/v1/db/transaction/${begin.body.data.transaction_id}/rollback`, {
      headers: { 'x-api-key': key },
      body: {},
    });
  });

  test('answers built by the envelope renderers carry each header once, with the request id sent', async () => {
    // Success and error bodies come with their headers built in (src/http/security-headers.ts);
    // the listener must neither add a second copy nor drop the request id a client sent.
    const body = JSON.stringify({ entity: 'things', action: 'select' });
    const cases: [path: string, extra: [string, string][], status: number][] = [
      ['/api/v1/db/query', [['X-API-Key', key]], 200],
      ['/api/v1/db/query', [['X-API-Key', 'sk_not-a-key']], 401],
      ['/api/v1/mail/send', [], 401],
    ];
    for (const [path, extra, status] of cases) {
      const base = path.startsWith('/api/v1/db') ? s.publicUrl : s.url;
      const headers: [string, string][] = [
        ['Host', new URL(base).host],
        ['Content-Type', 'application/json'],
        ['X-Request-Id', 'trace-me-1'],
        ...extra,
        ['Content-Length', String(body.length)],
      ];
      const raw = await rawRequest(base, requestText('POST', path, headers, body));
      expect(raw.responses[0]!.status).toBe(status);
      const head = raw.text.slice(0, raw.text.indexOf('\r\n\r\n')).toLowerCase();
      for (const name of [
        'x-content-type-options',
        'x-frame-options',
        'referrer-policy',
        'content-security-policy',
        'content-type',
        'x-request-id',
      ])
        expect([name, head.split(`\r\n${name}:`).length - 1]).toEqual([name, 1]);
      expect(raw.responses[0]!.headers['x-request-id']).toBe('trace-me-1');
      expect(raw.responses[0]!.headers['content-security-policy']).toBe(API_CSP);
      expect(head.split('\r\ncache-control:').length - 1).toBe(path.startsWith('/api/v1/db') ? 1 : 0);
    }
  });

  test('the admin API area is no-store', async () => {
    const r = await s.req('GET', '/api/admin/zz-no-such-endpoint');
    expect(r.headers.get('cache-control')).toContain('no-store');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
  });

  test('the reference page and its assets get a self-only CSP', async () => {
    for (const path of [
      '/api/docs',
      '/api/docs/assets/swagger-ui-bundle.js',
      '/api/docs/assets/init.js',
      '/api/docs/assets/swagger-ui.css',
    ]) {
      const res = await fetch(s.publicUrl + path);
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      const csp = res.headers.get('content-security-policy')!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-eval');
      expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  test('headers a route sets itself are kept', async () => {
    const res = await fetch(s.publicUrl + '/api/module/own-headers/page');
    expect(await res.text()).toBe('<p>hi</p>');
    for (const [k, v] of Object.entries(OWN)) expect(res.headers.get(k)).toBe(v);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  test('Files downloads keep their own set', async () => {
    const up = await upload(s, 'plain words\n', { name: 'a.txt', headers: { 'x-api-key': key } });
    expect(up.status).toBe(201);
    const res = await fetch(`${s.url}/api/v1/files/${up.body.file.id}/content`, { headers: { 'x-api-key': key } });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
    expect(res.headers.get('cache-control')).toBe('private, no-cache');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  test('refusals before routing carry them too: preflight, 413, 415, bad Host', async () => {
    const pre = await fetch(s.publicUrl + '/api/v1/db/query', {
      method: 'OPTIONS',
      headers: { origin: 'https://x.example', 'access-control-request-method': 'POST' },
    });
    expect(pre.status).toBe(204);
    expectBaseline(pre.headers);
    const big = await s.req('POST', '/api/v1/auth/login', {
      raw: JSON.stringify({ email: 'x'.repeat(2_000_000) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(big.status).toBe(413);
    expectBaseline(big.headers);
    expect(big.headers.get('cache-control')).toBe('no-store');
    const form = await s.req('POST', '/api/v1/db/query', { raw: 'a=1', headers: { 'content-type': 'text/plain' } });
    expect(form.status).toBe(415);
    expectBaseline(form.headers);
    const raw = await rawRequest(s.url, requestText('GET', '/healthz', [['Host', 'a b']]));
    expect(raw.responses[0]!.status).toBe(400);
    expect(raw.responses[0]!.headers['content-security-policy']).toBe(API_CSP);
  });
});

describe.skipIf(!HAS_CHROMIUM)('the reference page under its CSP in a real browser', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAuthServer('embedded');
  });
  afterAll(() => s.stop());

  test('renders with no CSP violation and cannot be framed', async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('console', (m) => {
        // The browser's own favicon request is a 404 on an API server; nothing else may fail.
        if (m.location().url.endsWith('/favicon.ico')) return;
        if (m.type() === 'error' || /Content Security Policy/i.test(m.text()))
          problems.push(`${m.text()} ${m.location().url}`);
      });
      page.on('pageerror', (e) => problems.push(String(e)));
      await page.goto(s.publicUrl + '/api/docs');
      await page.waitForSelector('.opblock', { timeout: 20_000 });
      // Expand an operation: rendering its models and examples exercises styles and images.
      await page.click('.opblock-summary');
      await page.waitForSelector('.opblock-body', { timeout: 10_000 });
      expect(problems).toEqual([]);

      // Another origin framing the page: the browser refuses (frame-ancestors 'none' / X-Frame-Options).
      const framer = Bun.serve({
        port: 0,
        hostname: '127.0.0.1',
        fetch: () =>
          new Response(`<iframe id="f" src="${s.publicUrl}/api/docs"></iframe>`, {
            headers: { 'content-type': 'text/html' },
          }),
      });
      try {
        const outer = await browser.newPage();
        await outer.goto(`http://127.0.0.1:${framer.port}/`);
        await outer.waitForTimeout(1500);
        const framed = outer.frames().find((f) => f.url().includes('/api/docs'));
        const rendered = framed ? await framed.$('.opblock').catch(() => null) : null;
        expect(rendered).toBeNull();
      } finally {
        framer.stop(true);
      }
    } finally {
      await browser.close();
    }
  });
});
