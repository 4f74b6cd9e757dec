import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startServer, type TestServer } from '../helpers/server';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';

describe.skipIf(!HAS_CHROMIUM)('API reference page in a real browser', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer('embedded');
  });
  afterAll(() => s.stop());

  test('renders the operations from /api/openapi.json using only its own origin', async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      const requested: string[] = [];
      page.on('request', (r) => requested.push(r.url()));
      await page.goto(s.publicUrl + '/api/docs');
      await page.waitForSelector('.opblock', { timeout: 20_000 });
      const paths = await page.$$eval('.opblock-summary-path', (els) => els.map((e) => e.getAttribute('data-path')));
      expect(paths).toContain('/api/v1/public/runtime-config');
      expect(await page.textContent('.info .title')).toContain('Basalt API');
      expect(requested.length).toBeGreaterThan(3);
      for (const url of requested) expect(url.startsWith(s.publicUrl + '/') || url.startsWith('data:')).toBe(true);
    } finally {
      await browser.close();
    }
  });
});
