/**
 * The data browser's Access view (docs/admin-api.md §Data browser): grants, row-level
 * security, policies and warnings read from the catalog, and "try as a user" (read-only,
 * audited), on both engines. Over HTTP: runs against the executable (scripts/test.ts); what
 * the migrations table records is read with the executable's own `basalt migrate` there.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES, freshDb } from '../helpers/engines';
import { startServer } from '../helpers/server';
import type { TestServer } from '../helpers/server';
import { adminReq, executableCli, signInAdmin, type AdminAuth } from '../helpers/admin';
import { signInUser, type SignedInUser } from '../helpers/users';
import { expectAError } from '../helpers/envelopes';
import { startAdminServer } from './support';
import { NOTES_MIGRATION } from '../database/user-data.fixtures';

/**
 * The operator migrations recorded as applied are exactly `names`: the table itself on the
 * source; on the executable, its `basalt migrate` finds nothing left to apply in the directory.
 */
async function expectRecorded(s: TestServer, dir: string, names: string[]): Promise<void> {
  if (s.target === 'source') {
    const rows = await s.sql<{ name: string }>('SELECT name FROM basalt.schema_migrations ORDER BY name');
    expect(rows.map((x) => x.name)).toEqual(names);
    return;
  }
  const r = await executableCli(s, ['migrate'], { BASALT_MIGRATIONS_DIR: dir });
  expect([r.code, r.stdout.trim()]).toEqual([0, 'nothing to apply; the database is up to date']);
}

describe.each(ENGINES)('admin data access on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  let ada: SignedInUser;
  const dir = mkdtempSync(join(tmpdir(), 'basalt-admin-access-'));
  beforeAll(async () => {
    writeFileSync(
      join(dir, '001.sql'),
      NOTES_MIGRATION +
        `CREATE TABLE open_board (id serial PRIMARY KEY, msg text);
         GRANT SELECT ON open_board TO basalt_anon;
         -- notes' policies on a table with no index at all.
         CREATE TABLE bare_notes (id bigserial PRIMARY KEY, owner_id uuid NOT NULL DEFAULT basalt.uid(), shared boolean);
         ALTER TABLE bare_notes ENABLE ROW LEVEL SECURITY;
         GRANT SELECT ON bare_notes TO basalt_user;
         CREATE POLICY own ON bare_notes FOR ALL TO basalt_user USING (owner_id = basalt.uid());
         CREATE POLICY shared_read ON bare_notes FOR SELECT TO basalt_user USING (shared);`,
    );
    s = await startAdminServer(engine, { env: { BASALT_MIGRATIONS_DIR: dir } });
    a = await signInAdmin(s);
    ada = await signInUser(s);
    for (const [body, shared] of [
      ['ada private', false],
      ['ada shared', true],
    ] as const)
      await s.req('POST', '/api/v1/db/query', {
        headers: ada.headers(),
        body: { entity: 'notes', action: 'insert', data: { body, shared } },
      });
  }, 240_000);
  afterAll(() => s.stop());

  test('grants per role and column, RLS, policies from the catalog', async () => {
    const r = await adminReq(s, a, 'GET', '/api/admin/data/notes/access');
    expect(r.status).toBe(200);
    const all = ['SELECT', 'INSERT', 'UPDATE'];
    expect(r.body.data).toMatchObject({
      table: 'notes',
      rls: true,
      roles: {
        basalt_user: { delete: true, columns: { id: all, owner_id: all, body: all, shared: all } },
        basalt_anon: { delete: false, columns: { id: ['SELECT'], body: ['SELECT'] } },
      },
      // shared_read reads the boolean `shared`, which no index starts with.
      warnings: [expect.objectContaining({ code: 'policy_column_unindexed', column: 'shared' })],
    });
    expect(r.body.data.policies).toEqual([
      {
        name: 'own',
        command: 'ALL',
        permissive: true,
        roles: ['basalt_user'],
        using: '(owner_id = basalt.uid())',
        with_check: '(owner_id = basalt.uid())',
      },
      {
        name: 'shared_read',
        command: 'SELECT',
        permissive: true,
        roles: ['basalt_anon', 'basalt_user'],
        using: 'shared',
        with_check: null,
      },
    ]);
    const posts = await adminReq(s, a, 'GET', '/api/admin/data/posts/access');
    expect(posts.body.data.roles.basalt_anon).toEqual({
      delete: false,
      columns: { id: ['SELECT'], title: ['SELECT'] },
    });
    expect(posts.body.data.roles.basalt_user.columns).toEqual({ id: ['SELECT'], title: ['SELECT', 'UPDATE'] });
    const hidden = await adminReq(s, a, 'GET', '/api/admin/data/hidden/access');
    expect(hidden.body.data).toMatchObject({
      rls: false,
      roles: { basalt_user: null, basalt_anon: null },
      warnings: [],
    });
    expectAError(await adminReq(s, a, 'GET', '/api/admin/data/nope/access'), 404, 'not_found');
  });

  test('warnings: granted with RLS off; a policy column without an index', async () => {
    const board = await adminReq(s, a, 'GET', '/api/admin/data/open_board/access');
    expect(board.body.data.warnings).toEqual([expect.objectContaining({ code: 'rls_disabled' })]);
    // notes' policies read owner_id (indexed) and shared (not indexed): one warning (the first
    // test); the same policies on a table without the index, two.
    const bare = await adminReq(s, a, 'GET', '/api/admin/data/bare_notes/access');
    expect(bare.body.data.warnings.map((w: { column: string }) => w.column)).toEqual(['owner_id', 'shared']);
  });

  test('try as a user or anon: the rows they would see; audited', async () => {
    const as = (user_id: string | null, extra = {}) =>
      adminReq(s, a, 'POST', '/api/admin/data/notes/try-as', { user_id, sort: [{ field: 'id' }], ...extra });
    const mine = await as(ada.user.id);
    expect(mine.status).toBe(200);
    expect(mine.body.data.rows.map((r: { body: string }) => r.body)).toEqual(['ada private', 'ada shared']);
    expect(mine.body.data.as).toBe(ada.email);
    const anon = await as(null);
    expect(anon.body.data.rows.map((r: { body: string }) => r.body)).toEqual(['ada shared']);
    expectAError(await as(crypto.randomUUID()), 404, 'not_found');
    expect((await as('not-a-uuid')).status).toBe(400);
    const refused = await adminReq(s, a, 'POST', '/api/admin/data/hidden/try-as', { user_id: ada.user.id });
    expectAError(refused, 403, 'forbidden');
    const log = await adminReq(s, a, 'GET', '/api/admin/audit?action=data.try_as&target=notes');
    expect(log.body.data.entries.length).toBeGreaterThanOrEqual(4);
  });

  test('changes from the panel: one audited transaction, written as a migration file recorded as applied', async () => {
    const before = await adminReq(s, a, 'GET', '/api/admin/data/open_board/access');
    expect(before.body.data).toMatchObject({ rls: false, realtime: false });
    const changes = [
      { op: 'grant', role: 'basalt_user', privilege: 'SELECT' },
      { op: 'grant', role: 'basalt_user', privilege: 'INSERT', columns: ['msg'] },
      { op: 'revoke', role: 'basalt_anon', privilege: 'SELECT' },
      { op: 'rls', enabled: true },
      {
        op: 'create_policy',
        name: 'posted "by" users',
        command: 'SELECT',
        roles: ['basalt_user'],
        using: "msg <> 'hidden'",
      },
      { op: 'create_policy', name: 'insert', command: 'INSERT', roles: ['basalt_user'], with_check: 'true' },
    ];
    const r = await adminReq(s, a, 'POST', '/api/admin/data/open_board/access', { changes });
    expect(r.status).toBe(200);
    expect(r.body.data.access).toMatchObject({
      rls: true,
      roles: {
        basalt_user: { delete: false, columns: { id: ['SELECT'], msg: ['SELECT', 'INSERT'] } },
        basalt_anon: null,
      },
      warnings: [expect.objectContaining({ code: 'policy_column_unindexed', column: 'msg' })],
    });
    expect(r.body.data.access.policies.map((x: { name: string }) => x.name)).toEqual(['insert', 'posted "by" users']);
    // The file: next in migrations.dir, exactly the statements that ran, recorded as applied.
    const file = r.body.data.migration.file as string;
    expect(file).toBe(join(dir, '002_panel_open_board_access.sql'));
    const text = readFileSync(file, 'utf8');
    for (const st of r.body.data.migration.statements) expect(text).toContain(`${st};`);
    expect(text).toContain('GRANT USAGE ON SEQUENCE public.open_board_id_seq TO basalt_user');
    expect(text).toContain('CREATE POLICY "posted ""by"" users" ON "public"."open_board"');
    await expectRecorded(s, dir, ['001.sql', '002_panel_open_board_access.sql']);
    // In effect at once for users: insert (the sequence granted too), and the policy filters.
    const ins = await s.req('POST', '/api/v1/db/query', {
      headers: ada.headers(),
      body: { entity: 'open_board', action: 'insert', data: { msg: 'hello' }, fields: ['msg'] },
    });
    expect(ins.body).toEqual({ success: true, data: { rows: [{ msg: 'hello' }], count: 1 } });
    expect((await adminReq(s, a, 'POST', '/api/admin/data/open_board/rows', { data: { msg: 'hidden' } })).status).toBe(
      201,
    );
    const seen = await s.req('POST', '/api/v1/db/query', {
      headers: ada.headers(),
      body: { entity: 'open_board', action: 'select', fields: ['msg'] },
    });
    expect(seen.body.data.rows).toEqual([{ msg: 'hello' }]);
    const log = await adminReq(s, a, 'GET', '/api/admin/audit?action=data.access&target=open_board');
    expect(log.body.data.entries[0].diff).toMatchObject({ migration: '002_panel_open_board_access.sql' });

    // Realtime on, from the same screen: its own file, audited data.realtime.
    const rt = await adminReq(s, a, 'POST', '/api/admin/data/open_board/access', {
      changes: [{ op: 'realtime', enabled: true }],
    });
    expect(rt.status).toBe(200);
    expect(rt.body.data.access.realtime).toBe(true);
    expect(rt.body.data.migration.file).toBe(join(dir, '003_panel_open_board_realtime.sql'));
    expect(readFileSync(rt.body.data.migration.file, 'utf8')).toContain(
      "SELECT basalt.realtime_enable('public.open_board');",
    );
    const rtLog = await adminReq(s, a, 'GET', '/api/admin/audit?action=data.realtime&target=open_board');
    expect(rtLog.body.data.entries).toHaveLength(1);

    // The operator's migrations stay the one source of truth: a fresh database built from
    // the directory ends with the same rules.
    const db2 = await freshDb(engine);
    const s2 = await startServer(engine, { db: db2, env: { BASALT_MIGRATIONS_DIR: dir } });
    try {
      await expectRecorded(s2, dir, [
        '001.sql',
        '002_panel_open_board_access.sql',
        '003_panel_open_board_realtime.sql',
      ]);
      const rules = ({ rls, roles, policies, realtime, warnings }: Record<string, unknown>) => ({
        rls,
        roles,
        policies,
        realtime,
        warnings,
      });
      const here = await adminReq(s, a, 'GET', '/api/admin/data/open_board/access');
      const there = await adminReq(s2, await signInAdmin(s2), 'GET', '/api/admin/data/open_board/access');
      expect(there.body.data.policies).toHaveLength(2);
      expect(rules(there.body.data)).toEqual(rules(here.body.data));
    } finally {
      await s2.stop();
      await db2.drop();
    }
  }, 240_000);

  test('a change PostgreSQL refuses, or that names an unknown column: 400, nothing applied, no file', async () => {
    const files = () => readdirSync(dir).sort();
    const before = files();
    const bad = await adminReq(s, a, 'POST', '/api/admin/data/hidden/access', {
      changes: [
        { op: 'rls', enabled: true },
        { op: 'create_policy', name: 'broken', command: 'SELECT', roles: ['basalt_user'], using: 'no_such_column = 1' },
      ],
    });
    expectAError(bad, 400, 'validation_error');
    // The answer names the policy and the clause PostgreSQL refused, under that change's field.
    expect(bad.body.error.details.fields).toEqual({
      'changes[1].using': expect.stringMatching(
        /^PostgreSQL refused the USING expression of policy broken: column "no_such_column" does not exist/,
      ),
    });
    const badCheck = await adminReq(s, a, 'POST', '/api/admin/data/hidden/access', {
      changes: [
        {
          op: 'create_policy',
          name: 'half',
          command: 'ALL',
          roles: ['basalt_user'],
          using: 'true',
          with_check: 'missing_too = 1',
        },
      ],
    });
    expectAError(badCheck, 400, 'validation_error');
    expect(Object.keys(badCheck.body.error.details.fields)).toEqual(['changes[0].with_check']);
    expect(badCheck.body.error.details.fields['changes[0].with_check']).toStartWith(
      'PostgreSQL refused the WITH CHECK expression of policy half: column "missing_too" does not exist',
    );
    const unknown = await adminReq(s, a, 'POST', '/api/admin/data/hidden/access', {
      changes: [{ op: 'grant', role: 'basalt_user', privilege: 'SELECT', columns: ['nope'] }],
    });
    expectAError(unknown, 400, 'validation_error');
    // Two statements in one expression never run: each statement is sent alone.
    const smuggled = await adminReq(s, a, 'POST', '/api/admin/data/hidden/access', {
      changes: [
        {
          op: 'create_policy',
          name: 'x',
          command: 'SELECT',
          roles: ['basalt_user'],
          using: 'true); DROP TABLE hidden; --',
        },
      ],
    });
    expectAError(smuggled, 400, 'validation_error');
    expect(Object.keys(smuggled.body.error.details.fields)).toEqual(['changes[0].using']);
    expect((await adminReq(s, a, 'POST', '/api/admin/data/hidden/select', {})).body.data.total).toBe(1);
    expect(files()).toEqual(before);
    const access = await adminReq(s, a, 'GET', '/api/admin/data/hidden/access');
    expect(access.body.data).toMatchObject({ rls: false, policies: [], roles: { basalt_user: null } });
    expect(existsSync(join(dir, '004_panel_hidden_access.sql'))).toBe(false);
  });
});
