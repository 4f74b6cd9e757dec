/**
 * The notes example (clients/js/examples/notes, docs/client.md) in headless Chromium, on a
 * page of another origin than the API (CORS through web.cors_origins), importing the client
 * from the server: two users in two browser contexts, the first with two tabs sharing
 * localStorage. Sign-up, inserts, each user sees only their own notes, the other tab updates
 * live, the 10 s access token expires and refreshes unnoticed, sign-out reaches the other
 * tab. Screenshots in test-output/client-notes/.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import { userEmail, USER_PASSWORD } from '../helpers/users';

const EXAMPLE = resolve(import.meta.dir, '../../clients/js/examples/notes');
const SHOTS = resolve(import.meta.dir, '../../test-output/client-notes');
/** The page's own origin: a static server on loopback (another port than the API: another origin). */
let APP = '';

describe.skipIf(!HAS_CHROMIUM).each(ENGINES)('the notes example in Chromium on %s', (engine) => {
  let s: TestServer;
  let browser: Browser;
  let pages: ReturnType<typeof Bun.serve>;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    // The example's files, as any static server would serve them.
    pages = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch(req) {
        const name = new URL(req.url).pathname.slice(1) || 'index.html';
        if (!['index.html', 'app.js'].includes(name)) return new Response('not found', { status: 404 });
        return new Response(readFileSync(join(EXAMPLE, name)), {
          headers: { 'content-type': name.endsWith('.js') ? 'text/javascript' : 'text/html' },
        });
      },
    });
    APP = `http://127.0.0.1:${pages.port}`;
    s = await startServer(engine, {
      migrations: { '001_notes.sql': readFileSync(join(EXAMPLE, 'migration.sql'), 'utf8') },
      env: {
        BASALT_WEB_CORS_ORIGINS: JSON.stringify([APP]),
        BASALT_AUTH_ACCESS_TOKEN_SECONDS: '10',
        BASALT_AUTH_RATE_LIMIT_REGISTER_PER_IP: '1000',
      },
    });
    browser = await launchBrowser();
    mkdirSync(SHOTS, { recursive: true });
  }, 120_000);
  afterAll(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
    await s?.stop();
    pages?.stop(true);
  });

  /** A browser profile: its own localStorage. */
  async function profile(): Promise<BrowserContext> {
    const c = await browser.newContext();
    contexts.push(c);
    return c;
  }
  /** What the pages said (console, errors, failed requests): printed when a step times out. */
  const said: string[] = [];
  const open = async (c: BrowserContext) => {
    const page = await c.newPage();
    page.on('console', (m) => said.push(`console: ${m.text()}`));
    page.on('pageerror', (e) => said.push(`error: ${e.message}`));
    page.on('requestfailed', (r) => said.push(`failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`));
    await page.goto(`${APP}/?api=${encodeURIComponent(s.publicUrl)}`);
    return page;
  };
  const notes = (page: Page) => page.locator('#notes li').allTextContents();
  /** Waits for the note `text` in the page's list. */
  const until = (page: Page, text: string) =>
    page.locator('#notes li').filter({ hasText: text }).first().waitFor({ timeout: 20_000 });
  const signUp = async (page: Page, email: string) => {
    await page.fill('#email', email);
    await page.fill('#password', USER_PASSWORD);
    await page.click('#sign-up-button');
    await page
      .locator('#who')
      .filter({ hasText: email })
      .waitFor()
      .catch(async (e) => {
        throw new Error(`${e.message}\nstatus: ${await page.locator('#status').textContent()}\n${said.join('\n')}`);
      });
  };
  const add = async (page: Page, body: string) => {
    await page.fill('#body', body);
    await page.click('#add button');
  };
  const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `${engine}-${name}.png`) });

  test('two users, two tabs: own notes only, live, through a token expiry, sign-out everywhere', async () => {
    const ada = await profile();
    const bob = await profile();
    const a1 = await open(ada);
    const b1 = await open(bob);
    await signUp(a1, userEmail('ada'));
    await signUp(b1, userEmail('bob'));
    // Ada's second tab: signed in from the shared storage.
    const a2 = await open(ada);
    await a2.locator('#signed-in').waitFor();

    await add(a1, 'ada one');
    await until(a2, 'ada one');
    await add(b1, 'bob one');
    await until(b1, 'bob one');
    // Ada's tabs hear her next note after Bob's, and never Bob's.
    await add(a1, 'ada two');
    await until(a2, 'ada two');
    await until(a1, 'ada two');
    expect(await notes(a2)).toEqual(['ada one', 'ada two']);
    expect(await notes(a1)).toEqual(['ada one', 'ada two']);
    expect(await notes(b1)).toEqual(['bob one']);
    await shot(a1, '1-ada');
    await shot(b1, '1-bob');

    // The point is time passing: the 10 s access tokens expire; the pages go on unnoticed.
    await Bun.sleep(11_000);
    await add(a2, 'ada after expiry');
    await until(a1, 'ada after expiry');
    await add(b1, 'bob after expiry');
    await until(b1, 'bob after expiry');
    for (const p of [a1, a2, b1]) expect(await p.locator('#status').textContent()).toBe('');
    await shot(a2, '2-ada-after-expiry');

    // Signing out in one tab signs the other out too; Bob stays.
    await a1.click('#sign-out');
    await a2.locator('#signed-out').waitFor();
    expect(await a2.locator('#signed-in').isHidden()).toBe(true);
    expect(await b1.locator('#signed-in').isVisible()).toBe(true);
    await shot(a2, '3-ada-signed-out');
  }, 90_000);
});
