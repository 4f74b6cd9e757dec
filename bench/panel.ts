/**
 * The administration panel in Chromium against the compiled executable (npm run bench:panel):
 *  - first load of the signed-in panel on the loopback, empty cache: bytes transferred,
 *    requests, and time to interactive (navigation start → the dashboard's figures on
 *    screen), from the Performance API; the sign-in page too;
 *  - the data grid's page change on a 1,000,000-row table: time from clicking Next to the
 *    next 50 rows rendered (measured in the page), p50/p99 over 20 clicks.
 * Engine: embedded (default) or `--engine external` (BASALT_BENCH_DATABASE_URL or the local server).
 */
import { parseArgs } from 'node:util';
import type { Browser, Page } from 'playwright-core';
import { HAS_CHROMIUM, launchBrowser } from '../test/helpers/browser';
import { startBinary } from '../test/panel/support';
import { externalDb, median, p99 } from './support';

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    engine: { type: 'string', default: 'embedded' },
    rows: { type: 'string', default: '1000000' },
    loads: { type: 'string', default: '10' },
    clicks: { type: 'string', default: '20' },
  },
});
if (!HAS_CHROMIUM) throw new Error('bench:panel needs Debian chromium at /usr/bin/chromium');
const ROWS = Number(values.rows);
const MIGRATION = `
CREATE TABLE big (id bigserial PRIMARY KEY, name text NOT NULL, amount numeric(12,2) NOT NULL, payload jsonb, created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO big (name, amount, payload) SELECT 'row ' || g, (g % 10000) / 100.0, jsonb_build_object('g', g, 'tags', jsonb_build_array('a', 'b')) FROM generate_series(1, ${ROWS}) g;
ANALYZE big;
`;
const EMAIL = 'bench@example.com';
const PASSWORD = 'bench password 1234';

const db = values.engine === 'external' ? await externalDb() : undefined;
console.log(`starting dist/basalt (${values.engine}) with a ${ROWS.toLocaleString('en-US')}-row table…`);
const t0 = performance.now();
const app = await startBinary(
  db ? { BASALT_DATABASE_URL: db.url } : {},
  { 'migrations/001_big.sql': MIGRATION },
  600_000,
);
console.log(`ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
const browser: Browser = await launchBrowser();
try {
  const link = (await app.waitFor(/(http:\/\/[^\s"]+\/_\/#\/setup\?token=[A-Za-z0-9_-]+)/))[1]!;
  const setup = await browser.newContext();
  const sp = await setup.newPage();
  await sp.goto(link);
  await sp.getByLabel('Email').fill(EMAIL);
  await sp.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await sp.getByLabel('Repeat password').fill(PASSWORD);
  await sp.getByRole('button', { name: 'Create administrator' }).click();
  await sp.getByRole('heading', { level: 1, name: 'Dashboard' }).waitFor();
  const cookies = await setup.cookies();
  await setup.close();

  const loads = Number(values.loads);
  const measureLoad = async (signedIn: boolean) => {
    const rows: { bytes: number; requests: number; tti: number; dcl: number; each: [string, number, number][] }[] = [];
    for (let i = 0; i < loads; i++) {
      const ctx = await browser.newContext(); // empty cache every time
      if (signedIn) await ctx.addCookies(cookies);
      const page = await ctx.newPage();
      // The moment it shows, taken in the page by a mutation observer set up before any script.
      await page.addInitScript(
        (sel: string) => {
          new MutationObserver((_, obs) => {
            if (document.querySelector(sel)) {
              (window as unknown as { shownAt: number }).shownAt = performance.now();
              obs.disconnect();
            }
          }).observe(document, { subtree: true, childList: true });
        },
        signedIn ? '.stat-value' : 'form button[type=submit]',
      );
      await page.goto(app.url + '/_/');
      const sel = signedIn ? '.stat-value' : 'form button[type=submit]';
      await page.waitForSelector(sel);
      const tti = await page.evaluate(() => (window as unknown as { shownAt: number }).shownAt);
      await page.waitForLoadState('networkidle');
      rows.push(
        await page.evaluate((tti) => {
          const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
          const res = performance.getEntriesByType('resource') as PerformanceResourceTiming[];
          const each = res.map((r): [string, number, number] => [
            new URL(r.name).pathname,
            Math.round(r.startTime),
            Math.round(r.duration),
          ]);
          return {
            bytes: nav.transferSize + res.reduce((n, r) => n + r.transferSize, 0),
            requests: 1 + res.length,
            tti,
            dcl: nav.domContentLoadedEventEnd,
            each,
          };
        }, tti),
      );
      await ctx.close();
    }
    // Where the time goes, from the median load: each request's start and duration (ms).
    const mid = [...rows].sort((a, b) => a.tti - b.tti)[Math.floor(rows.length / 2)]!;
    console.log(
      `  ${signedIn ? 'dashboard' : 'sign-in'} requests (start+duration ms): ${mid.each.map(([p, st, d]) => `${p.replace(/-[a-z0-9]+\./, '.')} ${st}+${d}`).join(', ')}`,
    );
    return {
      bytes: median(rows.map((r) => r.bytes)),
      requests: median(rows.map((r) => r.requests)),
      tti: median(rows.map((r) => r.tti)),
      ttiP99: p99(rows.map((r) => r.tti)),
      dcl: median(rows.map((r) => r.dcl)),
    };
  };
  console.log('measuring first loads…');
  const signIn = await measureLoad(false);
  const dash = await measureLoad(true);

  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  await ctx.addCookies(cookies);
  const page: Page = await ctx.newPage();
  page.on('console', (m) => console.log('page:', m.text()));
  console.log('paging the grid…');
  await page.goto(app.url + '/_/#/data/big');
  await page.getByTestId('pager-info').filter({ hasText: 'Rows 1–50' }).waitFor({ timeout: 60_000 });
  const pagerAtStart = await page.getByTestId('pager-info').textContent();
  const clicks = Number(values.clicks);
  const times: number[] = await page.evaluate(async (clicks) => {
    const pager = document.querySelector('[data-testid="pager-info"]')!;
    const out: number[] = [];
    for (let i = 1; i <= clicks; i++) {
      const next = [...document.querySelectorAll('button')].find((b) => b.textContent!.trim().startsWith('Next'))!;
      while (next.disabled) await new Promise((r) => setTimeout(r, 5));
      const want = `Rows ${(i * 50 + 1).toLocaleString()}–`;
      const started = performance.now();
      const shown = new Promise<void>((resolve) => {
        const check = () => {
          // Shown: the first row is the new page's first id (the grid's default order is the key).
          if (
            pager.textContent!.includes(want) &&
            !document.querySelector('[aria-busy="true"]') &&
            document.querySelector('tbody tr td.cell')?.textContent === String(i * 50 + 1)
          ) {
            obs.disconnect();
            resolve();
          }
        };
        const obs = new MutationObserver(check);
        obs.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
        // A page that never shows is reported, not waited for forever.
        setTimeout(() => {
          obs.disconnect();
          resolve();
          console.log(`no page change within 10 s: wanted "${want}", pager says "${pager.textContent}"`);
        }, 10_000);
      });
      next.click();
      await shown;
      await new Promise((r) => requestAnimationFrame(() => r(null))); // the frame that paints them
      out.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, 50));
    }
    return out;
  }, clicks);
  const firstId = await page.locator('tbody tr').first().locator('td.cell').first().textContent();
  // The share of the server: the select requests' own durations (Resource Timing).
  const selects = await page.evaluate(() =>
    (performance.getEntriesByType('resource') as PerformanceResourceTiming[])
      .filter((r) => r.name.endsWith('/select'))
      .slice(1)
      .map((r) => r.duration),
  );
  await ctx.close();

  const kb = (b: number) => `${(b / 1024).toFixed(1)} KB`;
  console.log(
    `\nengine: ${values.engine}; table big: ${ROWS.toLocaleString('en-US')} rows (the grid said "${pagerAtStart}"); loopback; Chromium ${browser.version()}`,
  );
  console.log(
    `first load, sign-in page (empty cache, median of ${loads}): ${kb(signIn.bytes)} transferred, ${signIn.requests} requests, DOMContentLoaded ${signIn.dcl.toFixed(0)} ms, interactive ${signIn.tti.toFixed(0)} ms (p99 ${signIn.ttiP99.toFixed(0)} ms)`,
  );
  console.log(
    `first load, signed in to the dashboard (median of ${loads}): ${kb(dash.bytes)} transferred, ${dash.requests} requests, DOMContentLoaded ${dash.dcl.toFixed(0)} ms, interactive ${dash.tti.toFixed(0)} ms (p99 ${dash.ttiP99.toFixed(0)} ms)`,
  );
  console.log(
    `data grid, Next on ${ROWS.toLocaleString('en-US')} rows (${clicks} clicks, last page starts at id ${firstId}): p50 ${median(times).toFixed(1)} ms, p99 ${p99(times).toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms; of which the select request p50 ${median(selects).toFixed(1)} ms`,
  );
} finally {
  await browser.close();
  await app.stop();
  await db?.drop();
}
