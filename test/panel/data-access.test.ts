/**
 * Data → a table → Access in Chromium (embedded engine): grants, RLS and realtime
 * switches, a policy created and dropped through the forms, each change staged with its SQL
 * and applied together as one migration file (named in the toast), "try as a user";
 * screenshots at both widths and themes; the
 * dashboard's live realtime figure.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import type { TestServer } from '../helpers/server';
import { signInAdmin } from '../helpers/admin';
import { signInUser } from '../helpers/users';
import { startAdminServer } from '../admin/support';
import { NOTES_MIGRATION } from '../database/user-data.fixtures';
import { adminPage, shotsEveryWay } from './support';
import { openSse } from '../realtime/sse';

describe.skipIf(!HAS_CHROMIUM)('the Access view of a table in the panel', () => {
  let s: TestServer;
  const dir = mkdtempSync(join(tmpdir(), 'basalt-panel-access-'));
  beforeAll(async () => {
    writeFileSync(join(dir, '001_notes.sql'), NOTES_MIGRATION);
    s = await startAdminServer('embedded', { env: { BASALT_MIGRATIONS_DIR: dir } });
  }, 180_000);
  afterAll(async () => {
    await s?.stop();
  });

  test('see the rules, stage realtime and a policy, apply both as one migration, drop, try as anon', async () => {
    const ada = await signInUser(s);
    await s.req('POST', '/api/v1/db/query', {
      headers: ada.headers(),
      body: { entity: 'notes', action: 'insert', data: { body: 'for everyone', shared: true } },
    });
    const a = await signInAdmin(s);
    const browser = await launchBrowser();
    try {
      const page = await adminPage(browser, s.url, a);
      const shots = (name: string) => shotsEveryWay(page, name);
      await page.goto(`${s.url}/_/#/data/notes`);
      await page.getByRole('link', { name: 'Access' }).click();
      const view = page.getByRole('region', { name: 'Access to notes' });
      const grants = view.getByTestId('grants');
      await grants
        .getByRole('row', { name: /owner_id/ })
        .getByText('SELECT, INSERT, UPDATE')
        .waitFor();
      await view.getByText("A policy reads column 'shared'").waitFor();
      await view.getByTestId('policies').getByText('(owner_id = basalt.uid())').first().waitFor();

      // Realtime on: staged first (its SQL shown), nothing applied yet.
      const realtime = view.locator('.access-switch', { hasText: 'Realtime' });
      await realtime.getByRole('button', { name: 'Turn on' }).click();
      const staged = view.getByRole('region', { name: 'Staged changes' });
      await staged.getByText("SELECT basalt.realtime_enable('public.notes');").waitFor();
      await realtime.getByText('staged: on').waitFor();
      expect(existsSync(join(dir, '002_panel_notes_realtime.sql'))).toBe(false);

      // A policy through the form: the expression is a placeholder on the table's own columns.
      await view.getByRole('button', { name: 'New policy' }).click();
      const dialog = page.getByRole('dialog');
      expect(await dialog.getByLabel(/^Using/).inputValue()).toBe('');
      expect(await dialog.getByLabel(/^Using/).getAttribute('placeholder')).toBe('owner_id = basalt.uid()');
      await dialog.getByLabel('Name').fill('team_read');
      await dialog.getByLabel('For').selectOption('SELECT');
      await dialog.getByLabel(/^Using/).fill('no_such_column');
      //    Filled in: a SELECT policy asks for no With check; the signed-in role is ticked.
      expect(await dialog.getByLabel(/^With check/).count()).toBe(0);
      expect(await dialog.getByRole('checkbox', { name: 'basalt_user (signed-in users)' }).isChecked()).toBe(true);
      await shots('data-access-policy');
      //    For all commands, with both expressions written: staging asks the server, which names
      //    the one PostgreSQL refused (here Using, though With check is filled in too), under that one.
      await dialog.getByLabel('For').selectOption('ALL');
      await dialog.getByLabel(/^With check/).fill('true');
      await dialog.getByRole('button', { name: 'Stage' }).click();
      const problem = dialog.locator('.field-error', {
        hasText: 'PostgreSQL refused the USING expression of policy team_read: column "no_such_column" does not exist',
      });
      await problem.waitFor();
      const problemId = (await problem.getAttribute('id'))!;
      expect(await dialog.getByLabel(/^Using/).getAttribute('aria-describedby')).toContain(problemId);
      expect(await dialog.locator('.field-error').count()).toBe(1);
      expect(await dialog.locator('.error-note').count()).toBe(0);
      await shots('data-access-policy-error');
      await dialog.getByLabel('For').selectOption('SELECT');
      await dialog.getByLabel(/^Using/).fill("shared AND body <> ''");
      await dialog.getByRole('button', { name: 'Stage' }).click();
      await staged.getByText('Policy team_read created.').waitFor();
      await staged.getByText('2 changes staged').waitFor();
      await shots('data-access-staged');

      // Both applied at once: one transaction, one migration file, one toast.
      await staged.getByRole('button', { name: 'Apply 2 changes' }).click();
      await page
        .locator('.toast')
        .filter({ hasText: '2 changes applied. Written to 002_panel_notes_access.sql' })
        .first()
        .waitFor();
      await view.getByTestId('policies').getByText('team_read').waitFor();
      await realtime.getByText('on', { exact: true }).waitFor();
      expect(existsSync(join(dir, '002_panel_notes_access.sql'))).toBe(true);
      expect(existsSync(join(dir, '003_panel_notes_access.sql'))).toBe(false);
      expect(await staged.count()).toBe(0);

      // Try as anon: the shared row only.
      await view.getByRole('button', { name: 'Run select' }).click();
      await view.getByTestId('try-as-result').getByText('As anon: 1 row').waitFor();

      await shots('data-access');

      await view.getByRole('button', { name: 'Drop team_read' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Drop' }).click();
      await staged.getByRole('button', { name: 'Apply 1 change' }).click();
      await page.locator('.toast').filter({ hasText: 'Policy team_read dropped.' }).first().waitFor();
      await view.getByTestId('policies').getByText('team_read').waitFor({ state: 'detached' });
      expect(existsSync(join(dir, '003_panel_notes_access.sql'))).toBe(true);
      const audit = await s.platform.db.query<{ action: string }>(
        "SELECT action FROM basalt.admin_audit WHERE action LIKE 'data.%' ORDER BY id",
      );
      expect(audit.rows.map((r) => r.action)).toEqual(['data.access', 'data.try_as', 'data.access']);

      // The dashboard: live streams of this instance, kept up to date while it is open.
      await page.goto(`${s.url}/_/#/`);
      const stat = page.getByTestId('realtime-stat');
      await stat.getByText('0 live').waitFor();
      const stream = await openSse(`${s.publicUrl}/api/v1/realtime?tables=notes`, ada.headers());
      expect(stream.status).toBe(200);
      await stat.getByText('1 live').waitFor({ timeout: 30_000 });
      stream.close();
    } finally {
      await browser.close();
    }
  }, 180_000);
});
