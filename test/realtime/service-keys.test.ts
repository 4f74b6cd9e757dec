/**
 * Realtime change streams for a service key (docs/realtime.md), on both engines. Writes made
 * beside the server (psql) need `canSql`; pruning past retention runs on a 30 s timer, so that
 * check calls it in process (`ON_SOURCE`).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { canSql, ON_SOURCE, startServer, type TestServer } from '../helpers/server';
import { createKey, revokeKey } from '../helpers/keys';
import { openSse } from './sse';

const SCHEMA = `
CREATE TABLE public.notes (id bigserial PRIMARY KEY, body text NOT NULL, n int8 NOT NULL DEFAULT 0);
CREATE TABLE public.quiet (id serial PRIMARY KEY);
CREATE TABLE public.secret (id serial PRIMARY KEY);
SELECT basalt.realtime_enable('notes');
SELECT basalt.realtime_enable('secret');`;

describe.each(ENGINES)('realtime with a service key on %s', (engine) => {
  let s: TestServer;
  let key: string;
  const stream = (q: string, headers: Record<string, string> = {}) =>
    openSse(`${s.publicUrl}/api/v1/realtime?${q}`, { 'x-api-key': key, ...headers });
  const db = (body: Record<string, unknown>, k = key) =>
    s.req('POST', '/api/v1/db/query', { headers: { 'x-api-key': k }, body: { entity: 'notes', ...body } });

  beforeAll(async () => {
    s = await startServer(engine, { migrations: { '001_realtime.sql': SCHEMA } });
    key = await createKey(s, { type: 'service', service: 'rt', permissions: ['db:query'], tables: ['notes', 'quiet'] });
  });
  afterAll(() => s.stop());

  test('insert, update, delete arrive in order, rows as the Database API answers them; delete carries the key only', async () => {
    const c = await stream('tables=notes');
    expect(c.status).toBe(200);
    expect(c.headers.get('content-type')).toStartWith('text/event-stream');
    const ins = await db({ action: 'insert', data: { body: 'hi', n: '9007199254740993' } });
    const id = ins.body.data.rows[0].id;
    await db({ action: 'update', data: { body: 'there' }, filters: [{ field: 'id', op: 'eq', value: id }] });
    await db({ action: 'delete', filters: [{ field: 'id', op: 'eq', value: id }] });
    const ev = await c.waitFor(3);
    expect(ev.map((e) => [e.data.action, e.data.row])).toEqual([
      ['insert', { id, body: 'hi', n: '9007199254740993' }],
      ['update', { id, body: 'there', n: '9007199254740993' }],
      ['delete', { id }],
    ]);
    expect(ev.every((e) => e.data.table === 'notes')).toBe(true);
    const ids = ev.map((e) => Number(e.id));
    expect(ids[0]! < ids[1]! && ids[1]! < ids[2]!).toBe(true);
    c.close();
  });

  test('a rolled-back transaction sends nothing; a committed one sends its rows in order', async () => {
    const c = await stream('tables=notes');
    const begin = await s.req('POST', '/api/v1/db/transaction/begin', { headers: { 'x-api-key': key }, body: {} });
    const tx = begin.body.data.transaction_id;
    await db({ action: 'insert', data: { body: 'never' }, transaction_id: tx });
    await s.req('POST', `/api/v1/db/transaction/${tx}/rollback`, { headers: { 'x-api-key': key }, body: {} });
    const begin2 = await s.req('POST', '/api/v1/db/transaction/begin', { headers: { 'x-api-key': key }, body: {} });
    const tx2 = begin2.body.data.transaction_id;
    await db({ action: 'insert', data: [{ body: 'one' }, { body: 'two' }], transaction_id: tx2 });
    await s.req('POST', `/api/v1/db/transaction/${tx2}/commit`, { headers: { 'x-api-key': key }, body: {} });
    await db({ action: 'insert', data: { body: 'three' } });
    const ev = await c.waitFor(3);
    expect(ev.map((e) => e.data.row.body)).toEqual(['one', 'two', 'three']);
    c.close();
  });

  test.if(canSql(engine))('writes from outside the API (SQL as psql would send it) are captured too', async () => {
    const c = await stream('tables=notes');
    await s.sql(`INSERT INTO public.notes (body) VALUES ('from sql')`);
    const ev = await c.waitFor(1);
    expect(ev[0]!.data).toMatchObject({ action: 'insert', row: { body: 'from sql' } });
    c.close();
  });

  test('Last-Event-ID replays what was missed, once, then continues live', async () => {
    const c = await stream('tables=notes');
    await db({ action: 'insert', data: { body: 'seen' } });
    const [seen] = await c.waitFor(1);
    c.close();
    await db({ action: 'insert', data: [{ body: 'missed 1' }, { body: 'missed 2' }] });
    const r = await stream('tables=notes', { 'last-event-id': seen!.id! });
    await r.waitFor(2);
    await db({ action: 'insert', data: { body: 'live' } });
    // A sentinel after it: the stream goes in id order, so a missed event replayed twice would come before it.
    await db({ action: 'insert', data: { body: 'sentinel' } });
    const ev = await r.waitFor(4);
    expect(r.of().map((e) => e.data.row.body)).toEqual(['missed 1', 'missed 2', 'live', 'sentinel']);
    expect(ev.map((e) => Number(e.id))).toEqual([...ev.map((e) => Number(e.id))].sort((a, b) => a - b));
    r.close();
  });

  test.if(ON_SOURCE)('a resume from before retention pruned gets event: reset, then live events', async () => {
    const c = await stream('tables=notes');
    await db({ action: 'insert', data: { body: 'old' } });
    const [old] = await c.waitFor(1);
    c.close();
    await db({ action: 'insert', data: { body: 'pruned' } });
    await s.platform.db.query(`UPDATE basalt.realtime_outbox SET created_at = now() - interval '1 hour'`);
    await s.platform.services.realtime.hub.prune();
    const r = await stream('tables=notes', { 'last-event-id': old!.id! });
    const [reset] = await r.waitFor(1, 'reset');
    expect(Number(reset!.id)).toBeGreaterThan(Number(old!.id));
    await db({ action: 'insert', data: { body: 'after' } });
    await r.waitFor(1);
    expect(r.of().map((e) => e.data.row.body)).toEqual(['after']);
    r.close();
  });

  test('a Last-Event-ID that is no event id gets event: reset', async () => {
    const garbage = await stream('tables=notes', { 'last-event-id': 'x' });
    await garbage.waitFor(1, 'reset');
    garbage.close();
  });

  test('refused before the stream starts: outside the whitelist 403, not enabled 400, bad key 401, no table 400', async () => {
    const outside = await stream('tables=notes,secret');
    expect(outside.status).toBe(403);
    expect(outside.body.error.code).toBe('forbidden');
    expect(outside.body.error.message).toContain('secret');
    const missing = await stream('tables=nope');
    expect(missing.status).toBe(403); // a name outside the whitelist reveals nothing
    const quiet = await stream('tables=quiet');
    expect(quiet.status).toBe(400);
    expect(quiet.body.error.code).toBe('realtime_not_enabled');
    const bad = await openSse(`${s.publicUrl}/api/v1/realtime?tables=notes`, { 'x-api-key': 'sk_nope' });
    expect(bad.status).toBe(401);
    const none = await stream('');
    expect(none.status).toBe(400);
    const mail = await createKey(s, { type: 'service', permissions: ['mail:send'] });
    const noDb = await openSse(`${s.publicUrl}/api/v1/realtime?tables=notes`, { 'x-api-key': mail });
    expect(noDb.status).toBe(403);
    const anon = await openSse(`${s.publicUrl}/api/v1/realtime?tables=notes`);
    expect(anon.status).toBe(401);
  });

  test('a ticket stands for the key once; tokens never in the URL', async () => {
    const t = await s.req('POST', '/api/v1/realtime/ticket', { headers: { 'x-api-key': key }, body: {} });
    expect(t.status).toBe(200);
    const { ticket, expires_at } = t.body.data;
    expect(ticket).toMatch(/^rt_/);
    expect(Date.parse(expires_at) - Date.now()).toBeLessThanOrEqual(61_000);
    if (canSql(engine)) {
      const stored = await s.sql<{ n: string }>(
        'SELECT count(*) AS n FROM basalt.realtime_tickets WHERE hash = sha256(convert_to($1, $2))',
        [ticket, 'UTF8'],
      );
      expect(Number(stored[0]!.n)).toBe(1);
    }
    const c = await openSse(`${s.publicUrl}/api/v1/realtime?tables=notes&ticket=${ticket}`);
    expect(c.status).toBe(200);
    await db({ action: 'insert', data: { body: 'by ticket' } });
    await c.waitFor(1);
    const again = await openSse(`${s.publicUrl}/api/v1/realtime?tables=notes&ticket=${ticket}`);
    expect(again.status).toBe(401);
    expect(again.body.error.code).toBe('invalid_ticket');
    c.close();
  });

  test('revoking the key ends its streams at once', async () => {
    const other = await createKey(s, { type: 'service', service: 'gone', permissions: ['db:*'], tables: ['notes'] });
    const c = await openSse(`${s.publicUrl}/api/v1/realtime?tables=notes`, { 'x-api-key': other });
    expect(c.status).toBe(200);
    await revokeKey(s, other);
    await c.ended;
    expect(c.of('revoked').length).toBe(1);
  });

  test('/metrics counts streams, events sent, resumes and resets', async () => {
    const m = await s.req('GET', '/metrics');
    expect(m.text).toMatch(/basalt_realtime_events_sent_total [1-9]/);
    expect(m.text).toMatch(/basalt_realtime_resumes_total [1-9]/);
    expect(m.text).toMatch(/basalt_realtime_resets_total [1-9]/);
    expect(m.text).toContain('basalt_realtime_connections ');
  });
});
