/**
 * The panel as served (src/modules/panel): hashed asset names, first-load JavaScript
 * under 100 KB gzipped, cache and security headers, gzip, and 404 on the public
 * listener when the split is on.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { panelRoutes, PANEL_CSP } from '../../src/modules/panel/routes';
import { startServer, type TestServer } from '../helpers/server';
import { areas } from '../../src/app';

const app = panelRoutes(undefined as never, areas.byName('panel'));
const ask = (path: string, headers: Record<string, string> = {}) =>
  app.handle(new Request('http://127.0.0.1' + path, { headers }));

async function page() {
  const res = await ask('/_/', { 'accept-encoding': 'gzip' });
  const html = new TextDecoder().decode(Bun.gunzipSync(new Uint8Array(await res.arrayBuffer())));
  const scripts = [...html.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]!);
  const styles = [...html.matchAll(/<link rel="stylesheet" href="([^"]+)"/g)].map((m) => m[1]!);
  return { res, html, scripts, styles };
}

describe('the panel as served', () => {
  test('index.html: no-cache, ETag revalidation, strict CSP, no inline script', async () => {
    const { res, html, scripts, styles } = await page();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('content-security-policy')).toBe(PANEL_CSP);
    for (const d of [
      "default-src 'self'",
      "script-src 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'self'",
    ])
      expect(PANEL_CSP).toContain(d);
    expect(PANEL_CSP).not.toContain("script-src 'self' 'unsafe");
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('same-origin');
    // Every <script> has a src (none inline), every asset is ours (no other host).
    expect(html.match(/<script/g)!.length).toBe(scripts.length);
    expect(scripts.length).toBe(1);
    expect(styles.length).toBe(1);
    for (const u of [...scripts, ...styles]) expect(u.startsWith('/_/assets/')).toBe(true);
    expect(html).not.toMatch(/(?:src|href)="(?:https?:)?\/\//);
    const again = await ask('/_/', { 'if-none-match': res.headers.get('etag')! });
    expect(again.status).toBe(304);
  });

  test('assets: content-hashed names, immutable for a year, gzip; the JavaScript is under 100 KB gzipped', async () => {
    const { scripts, styles } = await page();
    expect(scripts[0]).toMatch(/^\/_\/assets\/main-[a-z0-9]{6,}\.js$/);
    expect(styles[0]).toMatch(/^\/_\/assets\/styles-[a-z0-9]{6,}\.css$/);
    let gzipped = 0;
    for (const u of [...scripts, ...styles]) {
      const res = await ask(u, { 'accept-encoding': 'gzip, deflate, br' });
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(res.headers.get('content-encoding')).toBe('gzip');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('content-security-policy')).toBe(PANEL_CSP);
      const body = new Uint8Array(await res.arrayBuffer());
      if (u.endsWith('.js')) {
        gzipped += body.byteLength;
        expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
      }
      // Without Accept-Encoding: the plain bytes.
      const plain = await ask(u);
      expect(plain.headers.get('content-encoding')).toBeNull();
      expect(new Uint8Array(await plain.arrayBuffer())).toEqual(Bun.gunzipSync(body));
    }
    console.log(`panel JavaScript: ${(gzipped / 1024).toFixed(1)} KB gzipped`);
    expect(gzipped).toBeLessThan(100 * 1024);
    expect((await ask('/_/assets/main-nothere.js')).status).toBe(404);
  });

  test('/ and /_ redirect to /_/', async () => {
    for (const p of ['/', '/_']) {
      const res = await ask(p);
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/_/');
    }
  });
});

describe('the panel on the listeners', () => {
  let s: TestServer;
  afterAll(() => s?.stop());

  test('main listener serves it; the public listener answers 404 when the split is on', async () => {
    s = await startServer('embedded', { env: { BASALT_WEB_PUBLIC_API_SEPARATE: 'true' } });
    expect(s.publicUrl).not.toBe(s.url);
    const main = await fetch(s.url + '/_/');
    expect(main.status).toBe(200);
    expect(main.headers.get('content-security-policy')).toBe(PANEL_CSP);
    const js = (await main.text()).match(/src="([^"]+)"/)![1]!;
    expect((await fetch(s.url + js)).status).toBe(200);
    for (const p of ['/_/', js, '/']) expect((await fetch(s.publicUrl + p, { redirect: 'manual' })).status).toBe(404);
  });
});
