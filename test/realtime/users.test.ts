import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { signInUser, type SignedInUser } from '../helpers/users';
import { openSse, type SseClient } from './sse';

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
SELECT basalt.realtime_enable('private');`;

describe.each(ENGINES)('realtime for users and anon on %s', (engine) => {
  let s: TestServer;
  let a: SignedInUser;
  let b: SignedInUser;
  const url = (q: string) => `${s.publicUrl}/api/v1/realtime?${q}`;
  const sql = (text: string, params: unknown[] = []) => s.platform.db.query<any>(text, params);
  const note = async (owner: SignedInUser, body: string, shared = false) =>
    (
      await sql('INSERT INTO public.notes (owner_id, body, shared) VALUES ($1, $2, $3) RETURNING id', [
        owner.user.id,
        body,
        shared,
      ])
    ).rows[0].id as string;
  const changes = (c: SseClient) => c.of().map((e) => [e.data.action, e.data.row.body ?? e.data.row.id]);

  beforeAll(async () => {
    s = await startServer(engine);
    await s.platform.db.exec(SCHEMA);
    a = await signInUser(s);
    b = await signInUser(s);
  });
  afterAll(() => s.stop());

  test('a user sees their rows and shared ones, as their policies show them; updates in and out of view; deletes to all', async () => {
    const ca = await openSse(url('tables=notes'), a.headers());
    expect(ca.status).toBe(200);
    const mine = await note(a, 'mine');
    const hidden = await note(b, 'b private');
    const shared = await note(b, 'b shared', true);
    await sql('UPDATE public.notes SET shared = false WHERE id = $1', [shared]); // out of A's view
    await sql(`UPDATE public.notes SET shared = true, body = 'b now shared' WHERE id = $1`, [hidden]); // into view
    await sql(`UPDATE public.notes SET body = 'b still private' WHERE id = $1`, [shared]); // never seen: nothing
    await sql('DELETE FROM public.notes WHERE id = $1', [mine]);
    await ca.waitFor(5);
    await Bun.sleep(500);
    expect(changes(ca)).toEqual([
      ['insert', 'mine'],
      ['insert', 'b shared'],
      ['delete', shared],
      ['update', 'b now shared'],
      ['delete', mine],
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
    await sql(`INSERT INTO public.posts (title, draft) VALUES ('hello', 'secret draft')`);
    await c.waitFor(2);
    await Bun.sleep(500);
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
    await s.platform.services.auth.setDisabled(a.user.id, true);
    await Promise.all([c1.ended, c2.ended]);
    // Disabling revokes the user's sessions too: either reason ends the stream.
    expect(c1.of('revoked')).toHaveLength(1);
    expect(c2.of('revoked')).toHaveLength(1);
    await s.platform.services.auth.setDisabled(a.user.id, false);
    a = await signInUser(s, { email: a.email, register: false });
  });

  test("a user's ticket opens one stream, which ends with event: expired when the access token does", async () => {
    const t = await s.req('POST', '/api/v1/realtime/ticket', { headers: b.headers(), body: {} });
    expect(t.status).toBe(200);
    // The ticket keeps the token's expiry; bring it close so the stream expires now.
    await sql(`UPDATE basalt.realtime_tickets SET token_expires_at = now() + interval '1 second'`);
    const c = await openSse(url(`tables=notes&ticket=${t.body.data.ticket}`));
    expect(c.status).toBe(200);
    await c.ended;
    expect(c.of('expired')).toHaveLength(1);
    const again = await openSse(url(`tables=notes&ticket=${t.body.data.ticket}`));
    expect(again.status).toBe(401);
  });
});
