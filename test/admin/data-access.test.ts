/**
 * The data browser's Access view (docs/admin-api.md §Data browser): grants, row-level
 * security, policies and warnings read from the catalog, and "try as a user" (read-only,
 * audited), on both engines.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { signInUser, type SignedInUser } from '../helpers/users';
import { expectAError } from '../helpers/envelopes';
import { startAdminServer } from './support';
import { NOTES_MIGRATION } from '../database/user-data.fixtures';

describe.each(ENGINES)('admin data access on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  let ada: SignedInUser;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basalt-admin-access-'));
    writeFileSync(
      join(dir, '001.sql'),
      NOTES_MIGRATION +
        `CREATE TABLE open_board (id serial PRIMARY KEY, msg text);
         GRANT SELECT ON open_board TO basalt_anon;`,
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
      // shared_read reads the boolean `shared`, which leads no index.
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
    // notes' policies read owner_id (indexed) and shared (not indexed).
    await s.platform.db.exec('DROP INDEX notes_owner');
    try {
      const notes = await adminReq(s, a, 'GET', '/api/admin/data/notes/access');
      expect(notes.body.data.warnings.map((w: { column: string }) => w.column)).toEqual(['owner_id', 'shared']);
    } finally {
      await s.platform.db.exec('CREATE INDEX notes_owner ON notes (owner_id)');
    }
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
});
