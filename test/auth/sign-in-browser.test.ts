/**
 * "Sign in with <provider>" end to end in headless Chromium: a front-end page on its own
 * origin sends the browser to Basalt, the real OpenID Connect provider of this process
 * signs the user in, the callback lands on the page with `#code=`, and the page's script
 * trades it for tokens (CORS POST). Every URL the browser loaded is checked: no token in
 * any of them. The binding cookie is what the browser stored.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { startAuthServer } from './support';
import { startProvider, type TestProvider } from './provider';

/** The front-end's page: reads the fragment, drops it, exchanges the code, shows the result. */
const page = (api: string) => `<!doctype html><meta charset="utf-8"><title>app</title><pre id="out">…</pre>
<script>
const p = new URLSearchParams(location.hash.slice(1));
history.replaceState(null, '', location.pathname);
(async () => {
  if (p.get('error')) { out.textContent = 'error:' + p.get('error'); return; }
  const r = await fetch(${JSON.stringify(api)} + '/api/v1/auth/oauth/exchange', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: p.get('code') }) });
  const b = await r.json();
  window.tokens = b.data;
  out.textContent = r.status + ':' + (b.data && b.data.user ? b.data.user.email : JSON.stringify(b));
})();
</script>`;

describe.skipIf(!HAS_CHROMIUM).each(ENGINES)('provider sign-in in Chromium on %s', (engine) => {
  let s: TestServer;
  let idp: TestProvider;
  let app: ReturnType<typeof Bun.serve>;
  beforeAll(async () => {
    idp = await startProvider();
    s = await startAuthServer(engine);
    app = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch: () => new Response(page(s.publicUrl), { headers: { 'content-type': 'text/html' } }),
    });
    const appOrigin = `http://127.0.0.1:${app.port}`;
    await s.settings.set('auth.oauth_providers', idp.settings(['test']));
    await s.settings.set('auth.redirect_allowlist', [`${appOrigin}/auth/`]);
    await s.settings.set('web.cors_origins', [appOrigin]);
  }, 180_000);
  afterAll(async () => {
    app?.stop(true);
    await s?.stop();
    await idp?.stop();
  });

  test('start → provider → callback → #code → exchange, and no token in any URL', async () => {
    idp.as({ sub: `browser-${engine}`, email: `browser-${engine}@example.com`, email_verified: true });
    const browser = await launchBrowser();
    try {
      const context = await browser.newContext();
      const tab = await context.newPage();
      const urls: string[] = [];
      tab.on('request', (r) => urls.push(r.url()));
      const landed: string[] = []; // navigations, fragments included
      tab.on('framenavigated', (f) => landed.push(f.url()));
      const back = `http://127.0.0.1:${app.port}/auth/done`;
      await tab.goto(`${s.publicUrl}/api/v1/auth/oauth/test/start?redirect_to=${encodeURIComponent(back)}`);
      await tab.waitForFunction(() => document.getElementById('out')?.textContent !== '…', undefined, {
        timeout: 20_000,
      });
      expect(await tab.textContent('#out')).toBe(`200:browser-${engine}@example.com`);
      // The page dropped the fragment; the tokens came in the POST's answer only.
      expect(tab.url()).toBe(back);
      const tokens = (await tab.evaluate('window.tokens')) as { access_token: string; refresh_token: string };
      expect(tokens.access_token).toStartWith('eyJ');
      const visited = urls.join('\n');
      expect(urls.some((u) => u.startsWith(`${s.publicUrl}/api/v1/auth/oauth/test/callback?`))).toBe(true);
      expect(urls.some((u) => u.startsWith(idp.issuer))).toBe(true);
      expect(visited).not.toContain(tokens.access_token);
      expect(visited).not.toContain(tokens.refresh_token);
      // No JWT of any kind (ours or the provider's ID token): a JWT's shape, not its first three
      // letters, which a random state, nonce or PKCE challenge holds about once in 2,000 runs.
      expect(visited).not.toMatch(/eyJ[\w-]+\.eyJ[\w-]+\./);
      // What the browser keeps of the binding cookie.
      const [cookie] = (await context.cookies(s.publicUrl + '/api/v1/auth/oauth/test/callback')).filter(
        (c) => c.name === 'basalt_oauth',
      );
      expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/api/v1/auth/oauth/' });
      expect(cookie!.expires * 1000 - Date.now()).toBeLessThanOrEqual(600_000);
      // The page landed with the code in the fragment; replaying it fails (the page already spent it).
      const withCode = landed.find((u) => u.startsWith(`${back}#code=`));
      expect(withCode).toBeDefined();
      await tab.goto('about:blank');
      await tab.goto(withCode!);
      await tab.waitForFunction(() => document.getElementById('out')?.textContent !== '…');
      expect(await tab.textContent('#out')).toContain('invalid_exchange_code');
    } finally {
      await browser.close();
    }
  }, 120_000);
});
