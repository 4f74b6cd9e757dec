/**
 * Browser-test support for the panel: the compiled executable started in an empty
 * directory with its output read as it comes (the setup link is printed there), and
 * a page that records console errors, failed requests and error answers so a test
 * can insist there were none beyond those it expects.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import type { BrowserContext, Page } from 'playwright-core';
import { bareEnv, freePort, installBinary } from '../helpers/binary';
import { eventually } from '../helpers/wait';

export const SCREENSHOTS = resolve(import.meta.dir, '../../test-output/screenshots');

export interface RunningBinary {
  proc: Subprocess<'ignore', 'pipe', 'pipe'>;
  url: string;
  dir: string;
  output(): string;
  /** Resolves with the first output line matching `re`. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  stop(): Promise<number>;
}

/** `basalt serve` from a fresh install holding `files` (e.g. migrations), output streamed. */
export async function startBinary(
  env: Record<string, string>,
  files: Record<string, string> = {},
  startTimeoutMs = 45_000,
): Promise<RunningBinary> {
  const { dir, exe } = await installBinary();
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const port = await freePort();
  const proc = Bun.spawn([exe, 'serve'], {
    cwd: dir,
    env: bareEnv(dir, { BASALT_WEB_PORT: String(port), ...env }),
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  let out = '';
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const dec = new TextDecoder();
    for await (const chunk of s) out += dec.decode(chunk, { stream: true });
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  const url = `http://127.0.0.1:${port}`;
  const waitFor = async (re: RegExp, timeoutMs = 45_000) => {
    // The match, or 'exited' once the process is gone: either ends the wait.
    const m = await eventually(() => out.match(re) ?? (proc.exitCode !== null ? 'exited' : false), {
      timeout: timeoutMs,
      interval: 50,
    }).catch(() => null);
    if (m && m !== 'exited') return m;
    throw new Error(`no output matching ${re} within ${timeoutMs} ms:\n${out}`);
  };
  await waitFor(/"msg":"listening"/, startTimeoutMs);
  return {
    proc,
    url,
    dir,
    output: () => out,
    waitFor,
    stop: async () => {
      proc.kill('SIGTERM');
      return proc.exited;
    },
  };
}

export interface Problem {
  kind: 'console' | 'pageerror' | 'requestfailed' | 'response';
  text: string;
}

/**
 * Records what went wrong on a page. `expected(method, path, status)` says which error
 * answers the scenario provokes on purpose (a wrong password, the first "who am I"
 * before sign-in); Chromium's console line for such an answer is then expected too.
 */
export function watch(page: Page, expected: (method: string, path: string, status: number) => boolean): Problem[] {
  const problems: Problem[] = [];
  const excused: string[] = [];
  page.on('pageerror', (e) => problems.push({ kind: 'pageerror', text: e.message }));
  // A request the test's own reload or navigation cut short is not a failure of the panel.
  let navigations = 0;
  const startedAt = new WeakMap<object, number>();
  page.on('request', (r) => {
    if (r.isNavigationRequest() && r.frame() === page.mainFrame()) navigations++;
    startedAt.set(r, navigations);
  });
  page.on('requestfailed', (r) => {
    const f = r.failure()?.errorText ?? '';
    // A download handed to the browser's download manager, or a request cut by a navigation.
    if (
      f.includes('ERR_ABORTED') &&
      (r.url().includes('export.csv') || r.isNavigationRequest() || startedAt.get(r) !== navigations)
    )
      return;
    problems.push({ kind: 'requestfailed', text: `${r.method()} ${r.url()}: ${f}` });
  });
  page.on('response', (r) => {
    if (r.status() < 400) return;
    const path = new URL(r.url()).pathname;
    if (expected(r.request().method(), path, r.status())) excused.push(r.url());
    else problems.push({ kind: 'response', text: `${r.request().method()} ${r.url()} → ${r.status()}` });
  });
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const at = m.location()?.url ?? '';
    if (m.text().startsWith('Failed to load resource') && excused.includes(at)) return;
    problems.push({ kind: 'console', text: `${m.text()} (${at})` });
  });
  return problems;
}

/** Chromium context with the clipboard allowed (the Copy button). */
export async function newContext(
  browser: import('playwright-core').Browser,
  origin: string,
  width = 1280,
  height = 860,
): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport: { width, height }, acceptDownloads: true });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  return ctx;
}

/**
 * A page of the panel signed in as administrator `a` (its session cookie on `url`), in a
 * context of newContext's, each step waiting at most 20 s.
 */
export async function adminPage(
  browser: import('playwright-core').Browser,
  url: string,
  a: { token: string },
): Promise<Page> {
  const ctx = await newContext(browser, url);
  await ctx.addCookies([{ name: 'basalt_admin', value: a.token, url }]);
  const page = await ctx.newPage();
  page.setDefaultTimeout(20_000);
  return page;
}

export async function shot(page: Page, name: string) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
}

/**
 * Switch the system colour scheme under an open page, and wait until the panel has
 * repainted in it: the next frames, and the buttons' colour transitions (0.12 s,
 * styles.css) run out, so a screenshot does not catch controls half-way.
 */
export async function switchScheme(page: Page, scheme: 'light' | 'dark') {
  await page.emulateMedia({ colorScheme: scheme });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  await Bun.sleep(250);
}

/** `{name}-{width}-{scheme}.png` at both widths (1280, 390) and in both themes; back to light at 1280 after. */
export async function shotsEveryWay(page: Page, name: string) {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    for (const scheme of ['light', 'dark'] as const) {
      await switchScheme(page, scheme);
      await shot(page, `${name}-${width}-${scheme}`);
    }
  }
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.emulateMedia({ colorScheme: 'light' });
}
