/**
 * Logs in Chromium (embedded engine): a site user's request fails; the operator finds it by the
 * user's e-mail and the path, opens it and reads the error's cause; the chart of requests and
 * errors per minute. Screenshots of the list and the detail at both widths and in both themes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import type { TestServer } from '../helpers/server';
import { signInAdmin } from '../helpers/admin';
import { signInUser } from '../helpers/users';
import { startAdminServer } from '../admin/support';
import { adminPage, shotsEveryWay, watch } from './support';
import { LEDGER_MIGRATION } from '../logs/fixtures';

describe.skipIf(!HAS_CHROMIUM)('the Logs screen of the panel', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAdminServer('embedded', { migrations: { '001_ledger.sql': LEDGER_MIGRATION } });
  }, 180_000);
  afterAll(async () => {
    await s?.stop();
  });

  test("find a user's failing request by e-mail and path, read its cause", async () => {
    const other = await signInUser(s);
    const ada = await signInUser(s);
    for (const u of [other, ada, ada])
      await s.req('POST', '/api/v1/db/query', {
        headers: u.headers(),
        body: { entity: 'ledger_totals', action: 'select', filters: [{ field: 'id', op: 'eq', value: 1 }] },
      });
    const failed = await s.req('POST', '/api/v1/db/query', {
      headers: ada.headers(),
      body: { entity: 'ledger_totals', action: 'select' },
    });
    expect(failed.status).toBe(500);
    for (let i = 0; i < 5; i++) await s.req('GET', '/api/v1/public/missing');

    const a = await signInAdmin(s);
    const browser = await launchBrowser();
    try {
      const page = await adminPage(browser, s.url, a);
      const problems = watch(page, () => false);
      const shots = (name: string) => shotsEveryWay(page, name);

      await page.goto(`${s.url}/_/#/`);
      await page.getByRole('link', { name: 'Logs', exact: true }).first().click();
      await page.getByRole('heading', { name: 'Logs', exact: true }).waitFor();
      await page.getByRole('img', { name: /Requests and errors per minute/ }).waitFor();
      await page
        .getByRole('cell', { name: /\/api\/v1\/public\/missing/ })
        .first()
        .waitFor();
      await shots('logs');

      await page.getByLabel('User', { exact: true }).fill(ada.email);
      await page.getByLabel('Path', { exact: true }).fill('/api/v1/db');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      const rows = page.locator('tbody tr');
      await page.getByText('internal_error').waitFor();
      expect(await rows.count()).toBe(3);
      const chart = page.getByRole('img', { name: /Requests and errors per minute/ });
      await expect(chart.getAttribute('aria-label')).resolves.toContain('3 requests, 1 errors');

      await rows.filter({ hasText: '500' }).getByRole('button', { name: 'Details' }).click();
      const dialog = page.getByRole('dialog');
      await dialog.getByText('ledger row 13 is broken').first().waitFor();
      await dialog.getByText(ada.email).waitFor();
      await shots('logs-detail');
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 120_000);
});
