/**
 * Realtime change streams for signed-in users and anon under their policies (docs/realtime.md),
 * on both engines. The rows are written through the Database API with a service key (the
 * owner role, beyond any policy); the ticket rows read or changed beside the server need `canSql`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { canSql, startServer, type TestServer } from '../helpers/server';
import { signInUser, type SignedInUser } from '../helpers/users';
import { openSse, type SseClient } from './sse';
import { changes, serviceWriter, type Write } from './writer';

// The spec's example: own rows, shared rows readable by everyone.
const SCHEMA = `
CREATE TABLE public.notes (id bigserial PRIMARY KEY, owner_id uuid NOT NULL DEFAULT basalt.uid(),
                           body text NOT NULL, shared boolean NOT NULL DEFAULT false);
ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.notes TO basalt_user;
GRANT USAGE ON SEQUENCE public.notes_id_seq TO basalt_user;
GRANT SELECT ON public.notes TO basalt_anon;
CREATE POLICY own ON public.notes FOR ALL TO basalt_user
  USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
CREATE POLICY shared_read ON public.notes FOR SELECT TO basalt_anon, basalt_user USING (shared);
CREATE TABLE public.posts (id serial PRIMARY KEY, title text NOT NULL, draft text);
GRANT SELECT (id, title) ON public.posts TO basalt_anon;
CREATE TABLE public.private (id serial PRIMARY KEY);
SELECT basalt.realtime_enable('notes');
SELECT basalt.realtime_enable('posts');
SELECT basalt.realtime_enable('private');
-- A policy on the token's claims beyond sub: the session, how it signed in, its level.
CREATE TABLE public.by_claims (id serial PRIMARY KEY, sid text NOT NULL, aal text NOT NULL, amr text NOT NULL);
ALTER TABLE public.by_claims ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON public.by_claims TO basalt_user;
CREATE POLICY mine ON public.by_claims FOR SELECT TO basalt_user
  USING (sid = basalt.jwt() ->> 'sid' AND aal = basalt.jwt() ->> 'aal' AND amr = basalt.jwt() -> 'amr' ->> 0);
SELECT basalt.realtime_enable('by_claims');
CREATE TABLE public.quiet (id serial PRIMARY KEY);
GRANT SELECT ON public.quiet TO basalt_user;`;

describe.each(ENGINES)('realtime for users and anon on %s', (engine) => {
  let s: TestServer;
  let a: SignedInUser;
  let b: SignedInUser;
  const url = (q: string) => `${s.publicUrl}/api/v1/realtime?${q}`;
  let write: Write;
  const note = async (owner: SignedInUser, body: string, shared = false) =>
    (await write('notes', { action: 'insert', data: { owner_id: owner.user.id, body, shared }, fields: ['id'] }))[0]
      .id as string;
  const setNote = (id: string, data: Record<string, unknown>) =>
    write('notes', { action: 'update', data, filters: [{ field: 'id', op: 'eq', value: id }] });
  /** Disable or enable a user as an administrator does: in process, or through the executable's admin API. */
  const setDisabled = async (id: string, disabled: boolean) => {
    if (s.target === 'source') await s.platform.services.auth.setDisabled(id, disabled);
    else await s.admin('POST', `/api/admin/users/${id}/${disabled ? 'disable' : 'enable'}`);
  };

  beforeAll(async () => {
    s = await startServer(engine, { migrations: { '001_realtime.sql': SCHEMA } });
    ({ write } = await serviceWriter(s, ['notes', 'posts', 'by_claims']));
    a = await signInUser(s);
    b = await signInUser(s);
  });
  afterAll(() => s.stop());

  test('a user sees their rows and shared ones, as their policies show them; updates in and out of view; deletes of rows they saw', async () => {
    const ca = await openSse(url('tables=notes'), a.headers());
    expect(ca.status).toBe(200);
    const mine = await note(a, 'mine');
    const hidden = await note(b, 'b private');
    const shared = await note(b, 'b shared', true);
    await setNote(shared, { shared: false }); // out of A's view
    await setNote(hidden, { shared: true, body: 'b now shared' }); // into view
    await setNote(shared, { body: 'b still private' }); // never seen: nothing
    await write('notes', { action: 'delete', filters: [{ field: 'id', op: 'eq', value: mine }] });
    // A sentinel A sees, written after the change A must not: a stream gets its events in
    // commit order (docs/realtime.md, "Commit order"), so one sent to A would be here before it.
    await note(a, 'sentinel');
    await ca.waitFor(6);
    expect(changes(ca)).toEqual([
      ['insert', 'mine'],
      ['insert', 'b shared'],
      ['delete', shared],
      ['update', 'b now shared'],
      ['delete', mine],
      ['insert', 'sentinel'],
    ]);
    expect(ca.of()[0]!.data.row).toEqual({ id: mine, owner_id: a.user.id, body: 'mine', shared: false });
    expect(ca.of()[2]!.data.row).toEqual({ id: shared });
    ca.close();
  });

  test('anon reads what basalt_anon is granted: shared rows; granted columns only', async () => {
    const c = await openSse(url('tables=notes,posts'));
    expect(c.status).toBe(200);
    await note(a, 'private to a');
    await note(a, 'for all', true);
    await write('posts', { action: 'insert', data: { title: 'hello', draft: 'secret draft' } });
    // The post, written last, is the sentinel: events come in commit order, so the private
    // note (written first) would be among the first two.
    await c.waitFor(2);
    expect(c.of().map((e) => e.data.row)).toEqual([
      expect.objectContaining({ body: 'for all', shared: true }),
      { id: expect.any(Number), title: 'hello' },
    ]);
    c.close();
  });

  test('a table the caller may not read is refused before the stream: 401 for anon, 403 for a user', async () => {
    const anon = await openSse(url('tables=notes,private'));
    expect(anon.status).toBe(401);
    expect(anon.body.error.message).toContain('private');
    const user = await openSse(url('tables=posts'), a.headers());
    expect(user.status).toBe(403);
    expect(user.body.error.code).toBe('forbidden');
    const expired = await openSse(url('tables=notes'), { authorization: 'Bearer not.a.token' });
    expect(expired.status).toBe(401);
  });

  test('logout ends the stream of that session at once; disabling the user ends all of theirs', async () => {
    const c = await openSse(url('tables=notes'), a.headers());
    expect(c.status).toBe(200);
    const out = await s.req('POST', '/api/v1/auth/logout', { headers: a.headers(), body: {} });
    expect(out.status).toBe(200);
    await c.ended;
    expect(c.of('revoked')[0]?.data).toEqual({ reason: 'session_revoked' });
    a = await signInUser(s, { email: a.email, register: false });
    const c1 = await openSse(url('tables=notes'), a.headers());
    const c2 = await openSse(url('tables=notes'), a.headers());
    await setDisabled(a.user.id, true);
    await Promise.all([c1.ended, c2.ended]);
    // Disabling revokes the user's sessions too: either reason ends the stream.
    expect(c1.of('revoked')).toHaveLength(1);
    expect(c2.of('revoked')).toHaveLength(1);
    await setDisabled(a.user.id, false);
    a = await signInUser(s, { email: a.email, register: false });
  });

  test.if(canSql(engine))(
    "a user's ticket opens one stream, which ends with event: expired when the access token does",
    async () => {
      const t = await s.req('POST', '/api/v1/realtime/ticket', { headers: b.headers(), body: {} });
      expect(t.status).toBe(200);
      // The ticket keeps the token's expiry; bring it close so the stream expires now.
      await s.sql(`UPDATE basalt.realtime_tickets SET token_expires_at = now() + interval '1 second'`);
      const c = await openSse(url(`tables=notes&ticket=${t.body.data.ticket}`));
      expect(c.status).toBe(200);
      await c.ended;
      expect(c.of('expired')).toHaveLength(1);
      const again = await openSse(url(`tables=notes&ticket=${t.body.data.ticket}`));
      expect(again.status).toBe(401);
    },
  );

  test('the visibility check sees the claims a Database API request sees (sid, amr, aal), by header and by ticket', async () => {
    const claims = JSON.parse(Buffer.from(b.access_token.split('.')[1]!, 'base64url').toString());
    expect(claims.sid).toBeString();
    const byHeader = await openSse(url('tables=by_claims'), b.headers());
    const t = await s.req('POST', '/api/v1/realtime/ticket', { headers: b.headers(), body: {} });
    const byTicket = await openSse(url(`tables=by_claims&ticket=${t.body.data.ticket}`));
    const other = await openSse(url('tables=by_claims'), a.headers());
    for (const c of [byHeader, byTicket, other]) expect(c.status).toBe(200);
    const row = [claims.sid, String(claims.aal), claims.amr[0]];
    await write('by_claims', { action: 'insert', data: { sid: row[0], aal: row[1], amr: row[2] } });
    await write('by_claims', { action: 'insert', data: { sid: claims.sid, aal: '2', amr: claims.amr[0] } });
    // The Database API with the same token answers the same row.
    const api = await s.req('POST', '/api/v1/db/query', {
      headers: b.headers(),
      body: { entity: 'by_claims', action: 'select', fields: ['sid', 'aal', 'amr'] },
    });
    expect(api.body.data.rows).toEqual([{ sid: row[0], aal: row[1], amr: row[2] }]);
    // Sentinels written after the rows a stream must not see, one for each stream: events
    // come in commit order, so a row wrongly sent would be there before its sentinel.
    const mine = JSON.parse(Buffer.from(a.access_token.split('.')[1]!, 'base64url').toString());
    const otherRow = [mine.sid, String(mine.aal), mine.amr[0]];
    for (const r of [row, otherRow])
      await write('by_claims', { action: 'insert', data: { sid: r[0], aal: r[1], amr: r[2] } });
    await Promise.all([byHeader.waitFor(2), byTicket.waitFor(2), other.waitFor(1)]);
    const rows = (c: SseClient) => c.of().map((e) => [e.data.row.sid, e.data.row.aal, e.data.row.amr]);
    for (const c of [byHeader, byTicket]) expect(rows(c)).toEqual([row, row]);
    expect(rows(other)).toEqual([otherRow]);
    for (const c of [byHeader, byTicket, other]) c.close();
  });

  test('a ticket asked for with tables checks them now, as the stream would, where a browser can read the answer', async () => {
    const ask = (body: object, headers: Record<string, string> = b.headers()) =>
      s.req('POST', '/api/v1/realtime/ticket', { headers, body });
    const ok = await ask({ tables: 'notes,by_claims' });
    expect(ok.status).toBe(200);
    expect((await openSse(url(`tables=notes&ticket=${ok.body.data.ticket}`))).status).toBe(200);
    const hidden = await ask({ tables: 'notes,private' });
    expect(hidden.status).toBe(403);
    expect(hidden.body.error.code).toBe('forbidden');
    expect(hidden.body.error.message).toContain("'private'");
    const quiet = await ask({ tables: 'quiet' });
    expect(quiet.status).toBe(400);
    expect(quiet.body.error.code).toBe('realtime_not_enabled');
    expect((await ask({ tables: 'notes', stray: 1 })).status).toBe(400);
    const anon = await ask({ tables: 'private' }, {});
    expect(anon.status).toBe(401);
  });

  test("EventSource's reconnection: the ticket's stream sets a cookie that, with the same URL, resumes it (never either alone)", async () => {
    const t = await s.req('POST', '/api/v1/realtime/ticket', { headers: b.headers(), body: {} });
    const ticket = t.body.data.ticket as string;
    const first = await openSse(url(`tables=notes&ticket=${ticket}`));
    expect(first.status).toBe(200);
    const setCookie = first.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^basalt_rt_[0-9a-f]{16}=rt_[A-Za-z0-9_-]{43}; /);
    expect(setCookie).toContain('Path=/api/v1/realtime');
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Strict');
    expect(setCookie).toMatch(/Max-Age=\d+/);
    // Neither the ticket nor its cookie is stored in the clear.
    const secret = setCookie.split(';')[0]!.split('=')[1]!;
    if (canSql(engine)) {
      const stored = await s.sql(
        'SELECT count(*)::int AS n FROM basalt.realtime_tickets WHERE hash = sha256(convert_to($1, $2)) AND resume_of = sha256(convert_to($3, $2))',
        [secret, 'UTF8', ticket],
      );
      expect(stored[0].n).toBe(1);
    }
    await note(b, 'before the drop');
    const [seen] = await first.waitFor(1);
    first.close();
    await note(b, 'while away');
    const cookie = setCookie.split(';')[0]!;
    // What EventSource sends when it reconnects: the same URL, the cookie, Last-Event-ID.
    const again = await openSse(url(`tables=notes&ticket=${ticket}`), { cookie, 'last-event-id': seen!.id! });
    expect(again.status).toBe(200);
    expect(again.headers.get('set-cookie')).toBeNull();
    await again.waitFor(1);
    expect(again.of()[0]!.data.row.body).toBe('while away');
    // Reconnecting again works too (a dropped connection may drop more than once).
    const third = await openSse(url(`tables=notes&ticket=${ticket}`), { cookie, 'last-event-id': seen!.id! });
    expect(third.status).toBe(200);
    await third.waitFor(1);
    for (const c of [again, third]) c.close();
    // The spent ticket without the cookie, the cookie with another ticket, a made-up cookie: 401.
    expect((await openSse(url(`tables=notes&ticket=${ticket}`))).status).toBe(401);
    const t2 = await s.req('POST', '/api/v1/realtime/ticket', { headers: b.headers(), body: {} });
    const other = (await openSse(url(`tables=notes&ticket=${t2.body.data.ticket}`))).headers.get('set-cookie')!;
    const swapped = await openSse(url(`tables=notes&ticket=${ticket}`), {
      cookie: `${cookie.split('=')[0]}=${other.split(';')[0]!.split('=')[1]}`,
    });
    expect(swapped.status).toBe(401);
    // Once the session ends, the cookie resumes nothing.
    const out = await s.req('POST', '/api/v1/auth/logout', { headers: b.headers(), body: {} });
    expect(out.status).toBe(200);
    const after = await openSse(url(`tables=notes&ticket=${ticket}`), { cookie });
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe('invalid_ticket');
    b = await signInUser(s, { email: b.email, register: false });
  });
});
