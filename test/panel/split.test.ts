/**
 * The panel from a checkout (bundled from src/admin-ui at the first request, as with
 * `npm start`) in Chromium, with the public API on its own listener: the API reference
 * link leads to the public listener, and the panel is not served there.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import { startServer, type TestServer } from '../helpers/server';
import { signInAdmin } from '../helpers/admin';
import { watch } from './support';
import { freePort } from '../helpers/binary';

describe.skipIf(!HAS_CHROMIUM)('the panel with web.public_api_separate', () => {
  let s: TestServer;
  afterAll(() => s?.stop());

  test('API reference opens the public listener; the public listener has no panel', async () => {
    // A fixed public port, as in a real deployment: the panel derives the link from it.
    s = await startServer('embedded', {
      env: { BASALT_WEB_PUBLIC_API_SEPARATE: 'true', BASALT_WEB_PUBLIC_PORT: String(await freePort()) },
    });
    const admin = await signInAdmin(s);
    const browser = await launchBrowser();
    try {
      const ctx = await browser.newContext();
      const [name, value] = admin.cookie.split('=') as [string, string];
      await ctx.addCookies([{ name, value, url: s.url }]);
      const page = await ctx.newPage();
      const problems = watch(page, () => false);
      await page.goto(s.url + '/_/');
      await page.getByRole('heading', { level: 1, name: 'Dashboard' }).waitFor();
      const link = page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API reference' });
      await page.waitForFunction(
        (publicUrl) => document.querySelector('a[target=_blank]')?.getAttribute('href')?.startsWith(publicUrl),
        s.publicUrl,
      );
      expect(await link.getAttribute('href')).toBe(s.publicUrl + '/api/docs');
      const [docs] = await Promise.all([ctx.waitForEvent('page'), link.click()]);
      const answer = await docs.waitForLoadState().then(() => docs.evaluate(() => document.title));
      expect(answer).toContain('API reference');
      const onPublic = await (await ctx.newPage()).goto(s.publicUrl + '/_/');
      expect(onPublic!.status()).toBe(404);
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 120_000);
});
