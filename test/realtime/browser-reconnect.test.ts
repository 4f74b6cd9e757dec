/**
 * A real browser's EventSource (headless Chromium) on a ticket (docs/realtime.md, "In a
 * browser"): when the connection drops (a TCP proxy in front of the server cuts it), EventSource
 * reconnects by itself — the same URL, the spent ticket in it, the stream's cookie and
 * Last-Event-ID — and gets what it missed; nothing in the page but `new EventSource(url)`.
 * The rows are written through the Database API with a service key.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Browser } from 'playwright-core';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { tcpProxy } from '../helpers/tcp-proxy';
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
  let writer: string;
  let proxy: ReturnType<typeof tcpProxy>;

  beforeAll(async () => {
    s = await startServer(engine, { migrations: { '001_notes.sql': SCHEMA } });
    writer = await createKey(s, { type: 'service', service: 'writer', permissions: ['db:query'], tables: ['notes'] });
    u = await signInUser(s);
    const target = new URL(s.publicUrl);
    proxy = tcpProxy(target.hostname, Number(target.port));
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    proxy?.stop();
    await s?.stop();
  });

  test('reconnects by itself after the stream drops, and receives what it missed', async () => {
    const page = await browser.newPage();
    // The browser reaches the server through the proxy.
    const base = `http://127.0.0.1:${proxy.port}`;
    // A page of the API's origin (the stream's cookie is same-origin), as a front-end served there would be.
    await page.route(`${base}/app`, (r) =>
      r.fulfill({ contentType: 'text/html', body: '<!doctype html><title>app</title>' }),
    );
    await page.goto(`${base}/app`);
    const t = await s.req('POST', '/api/v1/realtime/ticket', { headers: u.headers(), body: {} });
    const streamUrl = `${base}/api/v1/realtime?tables=notes&ticket=${t.body.data.ticket}`;
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
    const insert = async (body: string) =>
      expect(
        (
          await s.req('POST', '/api/v1/db/query', {
            headers: { 'x-api-key': writer },
            body: { entity: 'notes', action: 'insert', data: { owner_id: u.user.id, body } },
          })
        ).status,
      ).toBe(200);

    await eventually(async () => (await opens()) === 1, { timeout: 20_000, what: 'the stream open' });
    await insert('one');
    await eventually(async () => (await got()).length === 1, { timeout: 20_000, what: 'the first event' });
    // The connection drops; a change is committed while the browser is away.
    proxy.cut();
    await insert('two');
    proxy.restore();
    await eventually(async () => (await opens()) === 2, { timeout: 30_000, what: 'EventSource reconnected' });
    await insert('three');
    await eventually(async () => (await got()).length === 3, { timeout: 30_000, what: 'the missed and the new event' });
    expect(await got()).toEqual(['one', 'two', 'three']);
    // The cookie the stream set is not readable by the page's scripts.
    expect(await page.evaluate(() => document.cookie)).toBe('');
    await page.close();
  }, 120_000);
});
