/**
 * The audit log (docs/admin-api.md §Audit log): a row is written with every change, in
 * its transaction — present when the change happened, absent when it failed, and
 * never a change without its row. Secrets are redacted. Over HTTP: runs against the
 * executable (scripts/test.ts); what a change left is counted through the admin API. The
 * refused audit write and retention need the database itself: audit-storage.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import type { Reply, TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { auditRows, startAdminServer } from './support';

/** What a change leaves, counted through the admin API as the panel shows it. */
type Measure = (s: TestServer, a: AdminAuth) => Promise<number>;
const list = async (s: TestServer, a: AdminAuth, path: string, field: string): Promise<any[]> => {
  const r = await adminReq(s, a, 'GET', path);
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${r.text}`);
  return r.body.data[field];
};
const measures = {
  keys: async (s, a) => (await list(s, a, '/api/admin/keys', 'keys')).length,
  revokedKeys: async (s, a) => (await list(s, a, '/api/admin/keys', 'keys')).filter((k) => k.revoked_at).length,
  storedSettings: async (s, a) =>
    (await list(s, a, '/api/admin/settings', 'settings')).filter((x) => x.source === 'database').length,
  templates: async (s, a) => (await list(s, a, '/api/admin/templates', 'templates')).length,
  notes: async (s, a) => (await adminReq(s, a, 'POST', '/api/admin/data/notes/select', {})).body.data.total,
  disabledUsers: async (s, a) =>
    (await list(s, a, '/api/admin/users?limit=500', 'users')).filter((u) => u.disabled_at).length,
} satisfies Record<string, Measure>;
const audited = async (s: TestServer, a: AdminAuth, action: string) => (await auditRows(s, action, a)).length;

/** [name, method, path, body, expected status, action, what the change left (a count that must move or not)] */
type Change = [string, string, string, unknown, number, string, keyof typeof measures];
const changes: Change[] = [
  [
    'key created',
    'POST',
    '/api/admin/keys',
    { type: 'service', service: 's', permissions: ['mail:send'] },
    201,
    'keys.create',
    'keys',
  ],
  [
    'key refused',
    'POST',
    '/api/admin/keys',
    { type: 'service', service: 's', permissions: [] },
    400,
    'keys.create',
    'keys',
  ],
  [
    'unknown key revoked',
    'POST',
    `/api/admin/keys/${'0'.repeat(8)}-0000-4000-8000-000000000000/revoke`,
    undefined,
    404,
    'keys.revoke',
    'revokedKeys',
  ],
  [
    'setting stored',
    'PUT',
    '/api/admin/settings/app.name',
    { value: 'Audited' },
    200,
    'settings.set',
    'storedSettings',
  ],
  [
    'setting refused (pinned)',
    'PUT',
    '/api/admin/settings/web.trusted_proxies',
    { value: [] },
    409,
    'settings.set',
    'storedSettings',
  ],
  [
    'setting refused (invalid)',
    'PUT',
    '/api/admin/settings/db.max_limit',
    { value: -1 },
    400,
    'settings.set',
    'storedSettings',
  ],
  [
    'template stored',
    'PUT',
    '/api/admin/templates/audited',
    { subject: 'x', text: 'y' },
    200,
    'templates.put',
    'templates',
  ],
  [
    'template refused',
    'PUT',
    '/api/admin/templates/audited-bad',
    { subject: 'x', text: '{{ ' },
    400,
    'templates.put',
    'templates',
  ],
  [
    'unknown template deleted',
    'DELETE',
    '/api/admin/templates/never-was',
    undefined,
    404,
    'templates.delete',
    'templates',
  ],
  [
    'row inserted',
    'POST',
    '/api/admin/data/notes/rows',
    { data: { id: 1, body: 'first', password: 'hunter2' } },
    201,
    'data.insert',
    'notes',
  ],
  [
    'row refused (duplicate key)',
    'POST',
    '/api/admin/data/notes/rows',
    { data: { id: 1, body: 'again' } },
    409,
    'data.insert',
    'notes',
  ],
  [
    'import refused on a bad line: all or nothing',
    'POST',
    '/api/admin/data/notes/import',
    { csv: 'id,body\n2,ok\nthree,bad\n' },
    400,
    'data.import',
    'notes',
  ],
  [
    'unknown user disabled',
    'POST',
    `/api/admin/users/${'0'.repeat(8)}-0000-4000-8000-000000000000/disable`,
    undefined,
    404,
    'users.disable',
    'disabledUsers',
  ],
];

describe.each(ENGINES)('admin audit log on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  beforeAll(async () => {
    const migrations = mkdtempSync(join(tmpdir(), 'basalt-admin-audit-'));
    writeFileSync(
      join(migrations, '001_notes.sql'),
      'CREATE TABLE notes (id integer PRIMARY KEY, body text NOT NULL, password text);',
    );
    s = await startAdminServer(engine, { env: { BASALT_MIGRATIONS_DIR: migrations } });
    a = await signInAdmin(s);
  }, 60_000);
  afterAll(() => s.stop());

  test.each(
    changes,
  )('%s: the row is there exactly when the change is', async (_n, method, path, body, status, action, measure) => {
    const count = () => measures[measure](s, a);
    const rowsBefore = await audited(s, a, action);
    const dataBefore = await count();
    const r = await adminReq(s, a, method, path, body);
    expect(r.status).toBe(status);
    const changed = status < 400;
    expect(await audited(s, a, action)).toBe(rowsBefore + (changed ? 1 : 0));
    if (changed) expect(await count()).not.toBe(dataBefore);
    else expect(await count()).toBe(dataBefore);
  });

  test('a row names who, from where, what and the request; secrets are redacted', async () => {
    const r = await adminReq(
      s,
      a,
      'POST',
      '/api/admin/keys',
      { type: 'public' },
      { 'x-request-id': 'req-audit-1', 'user-agent': 'panel-test' },
    );
    const row = (await auditRows(s, 'keys.create', a)).find((e) => e.request_id === 'req-audit-1');
    expect(row).toMatchObject({
      admin_id: a.admin.id,
      admin_email: a.email,
      ip: '127.0.0.1',
      user_agent: 'panel-test',
      action: 'keys.create',
      target: r.body.data.key.id,
    });
    expect(JSON.stringify(row)).not.toContain(r.body.data.secret);
    const inserted = (await auditRows(s, 'data.insert', a)).at(-1);
    expect(inserted.diff.data).toEqual({ id: 1, body: 'first', password: '[redacted]' });
    await adminReq(s, a, 'PUT', '/api/admin/settings/auth.jwt_secret', {
      value: 'a-very-long-secret-value-of-more-than-32-chars',
    });
    const secret = (await auditRows(s, 'settings.set', a)).find((e) => e.target === 'auth.jwt_secret');
    expect(secret.diff).toEqual({ before: null, after: '[redacted]' });
    await adminReq(s, a, 'DELETE', '/api/admin/settings/auth.jwt_secret');
  });

  test('filters: admin, action (exact or prefix), target, time; newest first with a cursor', async () => {
    const all = await adminReq(
      s,
      a,
      'GET',
      `/api/admin/audit?admin=${encodeURIComponent(a.email.toUpperCase())}&limit=2`,
    );
    expect(all.status).toBe(200);
    expect(all.body.data.entries.length).toBe(2);
    expect(Number(all.body.data.entries[0].id)).toBeGreaterThan(Number(all.body.data.entries[1].id));
    const next = await adminReq(
      s,
      a,
      'GET',
      `/api/admin/audit?admin=${encodeURIComponent(a.email)}&limit=2&before=${all.body.data.next_cursor}`,
    );
    expect(Number(next.body.data.entries[0].id)).toBeLessThan(Number(all.body.data.entries[1].id));
    const exact = await adminReq(s, a, 'GET', '/api/admin/audit?action=settings.set&target=app.name');
    expect(exact.body.data.entries.map((e: any) => [e.action, e.target])).toEqual([['settings.set', 'app.name']]);
    const future = await adminReq(s, a, 'GET', `/api/admin/audit?since=${new Date(Date.now() + 60_000).toISOString()}`);
    expect(future.body.data).toEqual({ entries: [], next_cursor: null });
    const bad = await adminReq(s, a, 'GET', '/api/admin/audit?before=abc');
    expect(bad.status).toBe(400);
  });

  test('newest first by number across digit counts (9 before 10 would be a text sort), and the cursor walks every entry once', async () => {
    // Enough entries that ids of one and two more digits are mixed in one listing.
    for (let i = 0; i < 12; i++)
      expect((await adminReq(s, a, 'PUT', '/api/admin/settings/app.name', { value: `order ${i}` })).status).toBe(200);
    const seen: number[] = [];
    let cursor: string | null = null;
    do {
      const r: Reply = await adminReq(s, a, 'GET', `/api/admin/audit?limit=5${cursor ? `&before=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      seen.push(...r.body.data.entries.map((e: any) => Number(e.id)));
      cursor = r.body.data.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...seen].sort((x, y) => y - x));
    expect(new Set(seen).size).toBe(seen.length);
    // Every entry: the same ones as one page holding them all.
    const whole = await adminReq(s, a, 'GET', '/api/admin/audit?limit=500');
    expect(whole.body.data.next_cursor).toBeNull();
    expect(seen).toEqual(whole.body.data.entries.map((e: any) => Number(e.id)));
  });

  test('sign-in success and failure, logout and password change are audited; the log itself cannot be changed through the API', async () => {
    for (const action of ['auth.login', 'admins.create']) expect(await audited(s, a, action)).toBeGreaterThan(0);
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH'])
      expect((await adminReq(s, a, method, '/api/admin/audit', {})).status).toBe(404);
  });
});
