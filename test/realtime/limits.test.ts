/**
 * Realtime limits, heartbeats and extensions' channels (docs/realtime.md): connections per
 * key, per user (anon: per client address) and in total → 429 too_many_connections, a slot
 * freed when a stream ends; the keep-alive comment at realtime.heartbeat_seconds; messages
 * published on a channel by an extension (a small one of this suite's, ext-demo), to everyone
 * or to some users, committed or rolled back with their transaction; the extension's rule
 * for who may follow which of its channels.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { signInUser, type SignedInUser } from '../helpers/users';
import { eventually } from '../helpers/wait';
import { openSse, type SseClient } from './sse';

const SCHEMA = `
CREATE TABLE public.notes (id bigserial PRIMARY KEY, body text NOT NULL);
GRANT SELECT ON public.notes TO basalt_user, basalt_anon;
SELECT basalt.realtime_enable('notes');`;

/** Publishes what it is sent on its channel: to everyone or to `users`; in a transaction, rolled back on `rollback`. */
const EXT_DEMO = `
import { defineExtension } from 'basalt';
export default defineExtension({ name: 'ext-demo', version: '1.0.0', setup(ctx) {
  ctx.routes.post('/publish', async ({ body, request }) => {
    const { channel, data, users, tx, rollback } = body;
    if (!tx) await ctx.realtime.publish(channel, data, users ? { users } : {});
    else
      await ctx.db
        .transaction(async (t) => {
          await ctx.realtime.publish(channel, data, { tx: t });
          if (rollback) throw new Error('roll back');
        })
        .catch((e) => {
          if (!rollback) throw e;
        });
    return ctx.reply(request, {});
  });
  // Who follows what: 'staff' only with a service key, 'user.<id>' only that user, the rest anyone.
  ctx.realtime.authorize((channel, who) => {
    if (channel === 'staff') return who.kind === 'key';
    if (channel.startsWith('user.')) return who.kind === 'user' && channel === 'user.' + who.userId;
    if (channel === 'broken') throw new Error('the rule failed');
    return true;
  });
} });
`;

describe.each(ENGINES)('realtime limits, heartbeats and channels on %s', (engine) => {
  let s: TestServer;
  let key: string;
  let other: string;
  let a: SignedInUser;
  let b: SignedInUser;
  const open: SseClient[] = [];
  const url = (q: string) => `${s.publicUrl}/api/v1/realtime?${q}`;
  const follow = async (q: string, headers: Record<string, string> = {}) => {
    const c = await openSse(url(q), headers);
    if (c.status === 200) open.push(c);
    return c;
  };
  const closeAll = async () => {
    for (const c of open.splice(0)) c.close();
    await eventually(async () => /^basalt_realtime_connections 0$/m.test((await s.req('GET', '/metrics')).text), {
      what: 'every stream closed (/metrics)',
    });
  };
  const extensions = mkdtempSync(join(tmpdir(), 'basalt-ext-demo-'));
  const publish = async (body: Record<string, unknown>) =>
    expect((await s.req('POST', '/api/module/ext-demo/publish', { body })).status).toBe(200);
  const refused = (c: SseClient, per: string) => {
    expect(c.status).toBe(429);
    expect(c.body.error.code).toBe('too_many_connections');
    expect(c.body.error.message).toContain(per);
  };

  beforeAll(async () => {
    mkdirSync(join(extensions, 'ext-demo'));
    writeFileSync(join(extensions, 'ext-demo', 'index.ts'), EXT_DEMO);
    s = await startServer(engine, {
      env: { BASALT_EXTENSIONS_DIR: extensions },
      migrations: { '001_realtime.sql': SCHEMA },
    });
    key = await createKey(s, { type: 'service', service: 'rt', permissions: ['db:query'], tables: ['notes'] });
    other = await createKey(s, { type: 'service', service: 'rt2', permissions: ['db:query'], tables: ['notes'] });
    [a, b] = [await signInUser(s), await signInUser(s)];
  }, 120_000);
  afterAll(async () => {
    for (const c of open) c.close();
    await s.stop();
    rmSync(extensions, { recursive: true, force: true });
  });

  test('per key: beyond realtime.max_connections_per_key → 429; another key is not counted; a closed stream frees its place', async () => {
    await s.settings.set('realtime.max_connections_per_key', 2);
    try {
      for (let i = 0; i < 2; i++) expect((await follow('tables=notes', { 'x-api-key': key })).status).toBe(200);
      refused(await follow('tables=notes', { 'x-api-key': key }), 'at most 2 per key');
      expect((await follow('tables=notes', { 'x-api-key': other })).status).toBe(200);
      open[0]!.close();
      await eventually(async () => (await follow('tables=notes', { 'x-api-key': key })).status === 200, {
        what: 'a place freed by the closed stream',
      });
    } finally {
      await s.settings.unset('realtime.max_connections_per_key');
      await closeAll();
    }
  });

  test('per user: beyond realtime.max_connections_per_user → 429, by header or ticket; another user and anon per address', async () => {
    await s.settings.set('realtime.max_connections_per_user', 1);
    try {
      expect((await follow('tables=notes', a.headers())).status).toBe(200);
      refused(await follow('tables=notes', a.headers()), 'at most 1 per user');
      const t = await s.req('POST', '/api/v1/realtime/ticket', { headers: a.headers(), body: {} });
      refused(await follow(`tables=notes&ticket=${t.body.data.ticket}`), 'at most 1 per user');
      expect((await follow('tables=notes', b.headers())).status).toBe(200);
      expect((await follow('tables=notes')).status).toBe(200);
      refused(await follow('tables=notes'), 'at most 1 per user');
    } finally {
      await s.settings.unset('realtime.max_connections_per_user');
      await closeAll();
    }
  });

  test('in total: beyond realtime.max_connections → 429 whoever asks', async () => {
    await s.settings.set('realtime.max_connections', 3);
    try {
      expect((await follow('tables=notes', { 'x-api-key': key })).status).toBe(200);
      expect((await follow('tables=notes', a.headers())).status).toBe(200);
      expect((await follow('tables=notes')).status).toBe(200);
      for (const h of [{ 'x-api-key': other }, b.headers(), {}])
        refused(await follow('tables=notes', h), 'at most 3 on this instance');
    } finally {
      await s.settings.unset('realtime.max_connections');
      await closeAll();
    }
  });

  test('a keep-alive comment every realtime.heartbeat_seconds', async () => {
    await s.settings.set('realtime.heartbeat_seconds', 1);
    try {
      const c = await follow('tables=notes', { 'x-api-key': key });
      await eventually(() => c.comments.filter((x) => x.trim() === 'keep-alive').length >= 2, {
        timeout: 20_000,
        what: 'two heartbeats',
      });
    } finally {
      await s.settings.unset('realtime.heartbeat_seconds');
      await closeAll();
    }
  });

  test("an extension's channel: to every follower, or to the users named; with a transaction, only if it commits", async () => {
    const ca = await follow('channels=ext-demo:news', a.headers());
    const cb = await follow('channels=ext-demo:news', b.headers());
    const anon = await follow('channels=ext-demo:news');
    const elsewhere = await follow('channels=ext-demo:other', a.headers());
    for (const c of [ca, cb, anon, elsewhere]) expect(c.status).toBe(200);
    await publish({ channel: 'news', data: { n: 1 } });
    await publish({ channel: 'news', data: { n: 2, only: 'a' }, users: [a.user.id] });
    await publish({ channel: 'news', data: { n: 'rolled back' }, tx: true, rollback: true });
    await publish({ channel: 'news', data: { n: 3 }, tx: true });
    // Sentinels, published after what a stream must not get: n: 3 for the news streams, one on
    // ext-demo:other for the last. Events come in commit order, so a wrong one would be before them.
    await publish({ channel: 'other', data: { n: 'sentinel' } });
    await ca.waitFor(3, 'message');
    await cb.waitFor(2, 'message');
    await anon.waitFor(2, 'message');
    await elsewhere.waitFor(1, 'message');
    const seen = (c: SseClient) => c.of('message').map((e) => e.data);
    expect(seen(ca)).toEqual([
      { channel: 'ext-demo:news', data: { n: 1 } },
      { channel: 'ext-demo:news', data: { n: 2, only: 'a' } },
      { channel: 'ext-demo:news', data: { n: 3 } },
    ]);
    expect(seen(cb)).toEqual([seen(ca)[0], seen(ca)[2]]);
    expect(seen(anon)).toEqual([seen(ca)[0], seen(ca)[2]]);
    expect(seen(elsewhere)).toEqual([{ channel: 'ext-demo:other', data: { n: 'sentinel' } }]);
    // Ids in commit order, like row changes.
    const ids = ca.of('message').map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    await closeAll();
  });

  test("an extension's rule decides who follows its channels: 403 (401 for anon) naming the channel, before the stream", async () => {
    const own = `ext-demo:user.${a.user.id}`;
    expect((await follow(`channels=${own}`, a.headers())).status).toBe(200);
    const notTheirs = await follow(`channels=${own}`, b.headers());
    expect(notTheirs.status).toBe(403);
    expect(notTheirs.body.error.code).toBe('forbidden');
    expect(notTheirs.body.error.message).toContain(own);
    const anon = await follow('channels=ext-demo:staff');
    expect(anon.status).toBe(401);
    expect(anon.body.error.code).toBe('unauthorized');
    expect(anon.body.error.message).toContain('ext-demo:staff');
    expect((await follow('channels=ext-demo:staff', a.headers())).status).toBe(403);
    expect((await follow('channels=ext-demo:staff', { 'x-api-key': key })).status).toBe(200);
    // One refused channel refuses the whole stream; a rule that throws refuses.
    expect((await follow('tables=notes&channels=ext-demo:news,ext-demo:staff', a.headers())).status).toBe(403);
    expect((await follow('channels=ext-demo:broken', a.headers())).status).toBe(403);
    // Channels the rule lets anyone follow stay open to anon.
    expect((await follow('channels=ext-demo:news')).status).toBe(200);
    await closeAll();
  });
});
