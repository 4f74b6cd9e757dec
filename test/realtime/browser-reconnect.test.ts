/**
 * A real browser's EventSource (headless Chromium) on a ticket (docs/realtime.md, "In a
 * browser"): when the server drops the stream, EventSource reconnects by itself — the
 * same URL, the spent ticket in it, the stream's cookie and Last-Event-ID — and gets
 * what it missed; nothing in the page but `new EventSource(url)`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Browser } from 'playwright-core';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { signInUser, type SignedInUser } from '../helpers/users';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import { eventually } from '../helpers/wait';

const SCHEMA = `
CREATE TABLE public.notes (id bigserial PRIMARY KEY, owner_id uuid NOT NULL DEFAULT basalt.uid(), body text NOT NULL);
ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON public.notes TO basalt_user;
CREATE POLICY own ON public.notes FOR SELECT TO basalt_user USING (owner_id = basalt.uid());
SELECT basalt.realtime_enable('notes');`;

describe.skipIf(!HAS_CHROMIUM).each(ENGINES)("a browser's EventSource on %s", (engine) => {
  let s: TestServer;
  let browser: Browser;
  let u: SignedInUser;

  beforeAll(async () => {
    s = await startServer(engine);
    await s.platform.db.exec(SCHEMA);
    u = await signInUser(s);
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await s?.stop();
  });

  test('reconnects by itself after the stream drops, and receives what it missed', async () => {
    const page = await browser.newPage();
    // A page of the API's origin (the stream's cookie is same-origin), as a front-end served there would be.
    await page.route(`${s.publicUrl}/app`, (r) =>
      r.fulfill({ contentType: 'text/html', body: '<!doctype html><title>app</title>' }),
    );
    await page.goto(`${s.publicUrl}/app`);
    const t = await s.req('POST', '/api/v1/realtime/ticket', { headers: u.headers(), body: {} });
    const streamUrl = `${s.publicUrl}/api/v1/realtime?tables=notes&ticket=${t.body.data.ticket}`;
    await page.evaluate((url) => {
      const w = window as unknown as { got: string[]; opens: number; es: EventSource };
      w.got = [];
      w.opens = 0;
      w.es = new EventSource(url);
      w.es.addEventListener('open', () => w.opens++);
      w.es.addEventListener('change', (e) => w.got.push(JSON.parse((e as MessageEvent).data).row.body));
    }, streamUrl);
    const got = () => page.evaluate(() => (window as unknown as { got: string[] }).got);
    const opens = () => page.evaluate(() => (window as unknown as { opens: number }).opens);
    const insert = (body: string) =>
      s.platform.db.query('INSERT INTO public.notes (owner_id, body) VALUES ($1, $2)', [u.user.id, body]);

    await eventually(async () => (await opens()) === 1, { timeout: 20_000, what: 'the stream open' });
    await insert('one');
    await eventually(async () => (await got()).length === 1, { timeout: 20_000, what: 'the first event' });
    // The server drops the stream; a change is committed while the browser is away.
    for (const st of s.platform.services.realtime.hub.streams) st.end('error');
    await insert('two');
    await eventually(async () => (await opens()) === 2, { timeout: 30_000, what: 'EventSource reconnected' });
    await insert('three');
    await eventually(async () => (await got()).length === 3, { timeout: 30_000, what: 'the missed and the new event' });
    expect(await got()).toEqual(['one', 'two', 'three']);
    // The cookie the stream set is not readable by the page's scripts.
    expect(await page.evaluate(() => document.cookie)).toBe('');
    await page.close();
  }, 120_000);
});
