/**
 * Realtime sends a user exactly what a SELECT as that user returns when the event is
 * evaluated (docs/realtime.md, "Visibility"): the policies PostgreSQL itself would apply
 * (a NOINHERIT membership gives none), the catalog as it is then (a policy dropped by a
 * migration or psql applies to the very next event), and deletes only to those who could
 * see the row. Absence is asserted after a later sentinel event has arrived.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { ADMIN_URL, ENGINES } from '../helpers/engines';
import { canSql, startServer, type TestServer } from '../helpers/server';
import { executableCli } from '../helpers/admin';
import { expectA } from '../helpers/envelopes';
import { signInUser, type SignedInUser } from '../helpers/users';
import { eventually } from '../helpers/wait';
import { openSse, type SseClient } from './sse';
import { changes, serviceWriter, type Write } from './writer';

describe.each(ENGINES)('realtime visibility as PostgreSQL answers it on %s', (engine) => {
  // Roles are cluster-wide on external PostgreSQL: names of this run only, dropped at the end.
  const tag = crypto.randomUUID().slice(0, 8);
  const gate = `rt_gate_${tag}`;
  const reader = `rt_reader_${tag}`;
  const SCHEMA = `
-- basalt_user is a member of ${reader} only through ${gate}, which does not inherit:
-- PostgreSQL gives basalt_user none of ${reader}'s policies.
CREATE ROLE ${gate} NOINHERIT;
CREATE ROLE ${reader};
GRANT ${reader} TO ${gate};
GRANT ${gate} TO basalt_user;
CREATE TABLE public.boards (id serial PRIMARY KEY, owner_id uuid NOT NULL, body text NOT NULL);
ALTER TABLE public.boards ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON public.boards TO basalt_user;
CREATE POLICY own ON public.boards FOR SELECT TO basalt_user USING (owner_id = basalt.uid());
CREATE POLICY readers ON public.boards FOR SELECT TO ${reader} USING (true);
SELECT basalt.realtime_enable('boards');
-- Shared rows readable by every user until the policy is dropped.
CREATE TABLE public.memos (id serial PRIMARY KEY, owner_id uuid NOT NULL, body text NOT NULL);
ALTER TABLE public.memos ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON public.memos TO basalt_user;
CREATE POLICY own ON public.memos FOR SELECT TO basalt_user USING (owner_id = basalt.uid());
CREATE POLICY everyone ON public.memos FOR SELECT TO basalt_user USING (true);
SELECT basalt.realtime_enable('memos');`;

  let s: TestServer;
  let a: SignedInUser;
  let b: SignedInUser;
  let writer: string;
  let write: Write;
  const url = (q: string) => `${s.publicUrl}/api/v1/realtime?${q}`;
  const insert = async (entity: string, owner: SignedInUser, body: string) =>
    (await write(entity, { action: 'insert', data: { owner_id: owner.user.id, body }, fields: ['id'] }))[0]
      .id as number;
  const remove = (entity: string, id: number) =>
    write(entity, { action: 'delete', filters: [{ field: 'id', op: 'eq', value: id }] });
  /** Wait for the change naming `body` (a sentinel written last), then return every change seen. */
  const until = async (c: SseClient, body: string) => {
    await eventually(() => c.of().some((e) => e.data.row.body === body), {
      timeout: 20_000,
      what: () => `the sentinel ${body} (have ${JSON.stringify(c.of())})`,
    });
    return changes(c);
  };
  /** SQL as an operator runs it beside the server: psql, or a migration applied by `basalt migrate`. */
  const operatorSql = async (name: string, sql: string) => {
    if (canSql(engine)) return void (await s.sql(sql));
    const dir = join(s.db.dataDir, 'test-migrations');
    writeFileSync(join(dir, name), sql);
    const r = await executableCli(s, ['migrate'], { BASALT_MIGRATIONS_DIR: dir });
    expect([r.code, r.stdout.trim()]).toEqual([0, `applied: ${name}`]);
  };

  beforeAll(async () => {
    s = await startServer(engine, { migrations: { '001_visibility.sql': SCHEMA } });
    ({ key: writer, write } = await serviceWriter(s, ['boards', 'memos']));
    a = await signInUser(s);
    b = await signInUser(s);
  });
  afterAll(async () => {
    await s.stop();
    if (engine !== 'external') return;
    const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
    await admin.unsafe(`DROP ROLE IF EXISTS ${gate}; DROP ROLE IF EXISTS ${reader}`).catch(() => {});
    await admin.end();
  });

  test('a policy for a role basalt_user is a NOINHERIT member of does not apply: the row a select hides is not sent', async () => {
    const c = await openSse(url('tables=boards'), a.headers());
    expect(c.status).toBe(200);
    await insert('boards', b, 'b private');
    await insert('boards', a, 'a sentinel');
    expect(await until(c, 'a sentinel')).toEqual([['insert', 'a sentinel']]);
    // The Database API, as the same user, agrees.
    const api = await s.req('POST', '/api/v1/db/query', {
      headers: a.headers(),
      body: { entity: 'boards', action: 'select', fields: ['body'] },
    });
    expect(expectA(api, 200).rows).toEqual([{ body: 'a sentinel' }]);
    c.close();
  });

  test('a policy dropped by a migration or psql applies to the very next event', async () => {
    const c = await openSse(url('tables=memos'), a.headers());
    expect(c.status).toBe(200);
    await insert('memos', b, 'b shared');
    expect(await until(c, 'b shared')).toEqual([['insert', 'b shared']]);
    await operatorSql('002_drop_everyone.sql', 'DROP POLICY everyone ON public.memos;');
    await insert('memos', b, 'b now private');
    await insert('memos', a, 'a sentinel');
    expect(await until(c, 'a sentinel')).toEqual([
      ['insert', 'b shared'],
      ['insert', 'a sentinel'],
    ]);
    c.close();
  });

  test('a delete goes only to the subscribers who could see the row', async () => {
    const ca = await openSse(url('tables=boards'), a.headers());
    const cb = await openSse(url('tables=boards'), b.headers());
    const service = await openSse(url('tables=boards'), { 'x-api-key': writer });
    for (const c of [ca, cb, service]) expect(c.status).toBe(200);
    const hidden = await insert('boards', b, 'b to delete');
    const mine = await insert('boards', a, 'a to delete');
    await remove('boards', hidden);
    await remove('boards', mine);
    const sentinel = await insert('boards', a, 'a after');
    expect(await until(ca, 'a after')).toEqual([
      ['insert', 'a to delete'],
      ['delete', mine],
      ['insert', 'a after'],
    ]);
    // B saw only its own row; a service key sees every row.
    await remove('boards', sentinel);
    await eventually(() => service.of().length === 6, { what: () => JSON.stringify(service.of()) });
    expect(changes(service)).toEqual([
      ['insert', 'b to delete'],
      ['insert', 'a to delete'],
      ['delete', hidden],
      ['delete', mine],
      ['insert', 'a after'],
      ['delete', sentinel],
    ]);
    await insert('boards', b, 'b sentinel');
    expect(await until(cb, 'b sentinel')).toEqual([
      ['insert', 'b to delete'],
      ['delete', hidden],
      ['insert', 'b sentinel'],
    ]);
    for (const c of [ca, cb, service]) c.close();
  });

  test('an update that changes the primary key: a delete of the old key and an insert of the new, to those who see the row', async () => {
    const ca = await openSse(url('tables=boards'), a.headers());
    const cb = await openSse(url('tables=boards'), b.headers());
    for (const c of [ca, cb]) expect(c.status).toBe(200);
    const id = await insert('boards', a, 'a moves');
    await write('boards', {
      action: 'update',
      data: { id: id + 1000 },
      filters: [{ field: 'id', op: 'eq', value: id }],
    });
    await insert('boards', a, 'a sentinel 2');
    expect(await until(ca, 'a sentinel 2')).toEqual([
      ['insert', 'a moves'],
      ['delete', id],
      ['insert', 'a moves'],
      ['insert', 'a sentinel 2'],
    ]);
    expect(ca.of()[2]!.data.row.id).toBe(id + 1000);
    await insert('boards', b, 'b sentinel 2');
    expect(await until(cb, 'b sentinel 2')).toEqual([['insert', 'b sentinel 2']]);
    for (const c of [ca, cb]) c.close();
  });
});
