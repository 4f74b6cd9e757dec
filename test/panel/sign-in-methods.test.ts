/**
 * The user page's sign-in methods in Chromium (embedded engine, the panel served by the
 * platform): a passwordless provider account with TOTP on; the operator resets MFA and is
 * refused the unlink of the last provider; the Settings screen's provider test.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Secret, TOTP } from 'otpauth';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import type { TestServer } from '../helpers/server';
import { signInAdmin } from '../helpers/admin';
import { startAdminServer } from '../admin/support';
import { fragment, startProvider, walk, type TestProvider } from '../auth/provider';
import { SCREENSHOTS } from './support';
import { CLI_ACTOR } from '../../src/modules/admin/audit';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

describe.skipIf(!HAS_CHROMIUM)('sign-in methods in the panel', () => {
  let s: TestServer;
  let idp: TestProvider;
  beforeAll(async () => {
    idp = await startProvider();
    s = await startAdminServer('embedded');
    await s.platform.settings.set('auth.oauth_providers', idp.settings(['test']));
    await s.platform.settings.set('auth.redirect_allowlist', ['https://app.example.com']);
  }, 180_000);
  afterAll(async () => {
    await s?.stop();
    await idp?.stop();
  });

  test('reset MFA and a refused unlink on the user page; test sign-in on Settings', async () => {
    idp.as({ sub: 'panel-user', email: 'panel-user@example.com', email_verified: true });
    const w = await walk(s, 'test', 'https://app.example.com/');
    const ex = await s.req('POST', '/api/v1/auth/oauth/exchange', {
      body: { code: fragment(w.final.location).get('code') },
    });
    const bearer = { authorization: `Bearer ${ex.body.data.access_token}` };
    const { secret } = (await s.req('POST', '/api/v1/auth/mfa/totp/enroll', { headers: bearer })).body.data;
    const code = new TOTP({ secret: Secret.fromBase32(secret) }).generate();
    expect((await s.req('POST', '/api/v1/auth/mfa/totp/confirm', { headers: bearer, body: { code } })).status).toBe(
      200,
    );

    const a = await signInAdmin(s);
    const browser = await launchBrowser();
    try {
      const ctx = await browser.newContext();
      await ctx.addCookies([{ name: 'basalt_admin', value: a.token, url: s.url }]);
      const page = await ctx.newPage();
      page.setDefaultTimeout(20_000);
      await page.goto(`${s.url}/_/#/users/${ex.body.data.user.id}`);
      const section = page.locator('section', { has: page.getByRole('heading', { name: 'Sign-in methods' }) });
      await section.getByText('TOTP on · 10 recovery codes left').waitFor();
      await section.getByText('none (provider or e-mail code only)').waitFor();
      // The last way to sign in cannot be unlinked: the server's refusal is shown.
      await section.getByRole('button', { name: 'Unlink' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Unlink' }).click();
      await page.locator('.toast').filter({ hasText: 'last way to sign in' }).first().waitFor();
      await section.getByRole('button', { name: 'Reset MFA' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Reset MFA' }).click();
      await page.locator('.toast').filter({ hasText: 'Second factor turned off.' }).first().waitFor();
      await section.getByText('off', { exact: true }).waitFor();
      const audit = await s.platform.db.query<{ action: string }>(
        "SELECT action FROM basalt.admin_audit WHERE action LIKE 'users.%' ORDER BY id",
      );
      expect(audit.rows.map((r) => r.action)).toEqual(['users.reset-mfa']);

      await page.goto(`${s.url}/_/#/settings?group=auth`);
      const providers = page.locator('section', { has: page.getByRole('heading', { name: 'Sign-in providers' }) });
      await providers.getByRole('button', { name: 'Test sign-in' }).click();
      await providers.getByText('passed', { exact: true }).waitFor();
      await providers.getByText(/1 signing key\(s\) at /).waitFor();
      await providers.getByText(/redirect_uri .*\/api\/v1\/auth\/oauth\/test\/callback/).waitFor();
      mkdirSync(SCREENSHOTS, { recursive: true });
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: 900 });
        await providers.screenshot({ path: join(SCREENSHOTS, `provider-check-${width}.png`) });
      }

      // A locked administrator shows on the dashboard (the backstop lowered to 2 for the test).
      await s.settings.set('admin.lockout_backstop_threshold', 2);
      const locked = `locked-${Date.now()}@example.com`;
      await s.platform.services.admin.create(locked, 'locked admin password 1', CLI_ACTOR);
      for (const from of ['198.18.7.1', '198.18.7.2'])
        await s.req('POST', '/api/admin/auth/login', {
          body: { email: locked, password: 'not the password' },
          headers: { 'x-forwarded-for': from, 'sec-fetch-site': 'same-origin' },
        });
      await page.goto(`${s.url}/_/#/`);
      const users = page.locator('.stat', { hasText: 'administrator' });
      await users.getByText('1 locked', { exact: true }).waitFor();
      for (const scheme of ['light', 'dark'] as const)
        for (const width of [1280, 390]) {
          await page.emulateMedia({ colorScheme: scheme });
          await page.setViewportSize({ width, height: 900 });
          await users.screenshot({ path: join(SCREENSHOTS, `dashboard-admin-locked-${width}-${scheme}.png`) });
        }
    } finally {
      await browser.close();
    }
  }, 120_000);
});
