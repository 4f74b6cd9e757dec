/**
 * The audit log (docs/admin-api.md §Audit log): a row is written with every change, in
 * its transaction — present when the change happened, absent when it failed, and
 * never a change without its row. Secrets are redacted; old rows go in batches.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import type { Reply, TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { pruneAudit } from '../../src/modules/admin/audit';
import { startAdminServer } from './support';

const count = async (s: TestServer, sql: string, params: unknown[] = []) =>
  (await s.platform.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params)).rows[0]!.n;

/** [name, method, path, body, expected status, action, what the change left in the database (a count that must move or not)] */
type Change = [string, string, string, unknown, number, string, string];
const changes: Change[] = [
  [
    'key created',
    'POST',
    '/api/admin/keys',
    { type: 'service', service: 's', permissions: ['mail:send'] },
    201,
    'keys.create',
    'basalt.api_keys',
  ],
  [
    'key refused',
    'POST',
    '/api/admin/keys',
    { type: 'service', service: 's', permissions: [] },
    400,
    'keys.create',
    'basalt.api_keys',
  ],
  [
    'unknown key revoked',
    'POST',
    `/api/admin/keys/${'0'.repeat(8)}-0000-4000-8000-000000000000/revoke`,
    undefined,
    404,
    'keys.revoke',
    'basalt.api_keys WHERE revoked_at IS NOT NULL',
  ],
  [
    'setting stored',
    'PUT',
    '/api/admin/settings/app.name',
    { value: 'Audited' },
    200,
    'settings.set',
    'basalt.settings',
  ],
  [
    'setting refused (pinned)',
    'PUT',
    '/api/admin/settings/web.trusted_proxies',
    { value: [] },
    409,
    'settings.set',
    'basalt.settings',
  ],
  [
    'setting refused (invalid)',
    'PUT',
    '/api/admin/settings/db.max_limit',
    { value: -1 },
    400,
    'settings.set',
    'basalt.settings',
  ],
  [
    'template stored',
    'PUT',
    '/api/admin/templates/audited',
    { subject: 'x', text: 'y' },
    200,
    'templates.put',
    'basalt.mail_templates',
  ],
  [
    'template refused',
    'PUT',
    '/api/admin/templates/audited-bad',
    { subject: 'x', text: '{{ ' },
    400,
    'templates.put',
    'basalt.mail_templates',
  ],
  [
    'unknown template deleted',
    'DELETE',
    '/api/admin/templates/never-was',
    undefined,
    404,
    'templates.delete',
    'basalt.mail_templates',
  ],
  [
    'row inserted',
    'POST',
    '/api/admin/data/notes/rows',
    { data: { id: 1, body: 'first', password: 'hunter2' } },
    201,
    'data.insert',
    'public.notes',
  ],
  [
    'row refused (duplicate key)',
    'POST',
    '/api/admin/data/notes/rows',
    { data: { id: 1, body: 'again' } },
    409,
    'data.insert',
    'public.notes',
  ],
  [
    'import refused on a bad line: all or nothing',
    'POST',
    '/api/admin/data/notes/import',
    { csv: 'id,body\n2,ok\nthree,bad\n' },
    400,
    'data.import',
    'public.notes',
  ],
  [
    'unknown user disabled',
    'POST',
    `/api/admin/users/${'0'.repeat(8)}-0000-4000-8000-000000000000/disable`,
    undefined,
    404,
    'users.disable',
    'basalt.users WHERE disabled_at IS NOT NULL',
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
  )('%s: the row is there exactly when the change is', async (_n, method, path, body, status, action, table) => {
    const rowsBefore = await count(s, 'basalt.admin_audit WHERE action = $1', [action]);
    const dataBefore = await count(s, table);
    const r = await adminReq(s, a, method, path, body);
    expect(r.status).toBe(status);
    const changed = status < 400;
    expect(await count(s, 'basalt.admin_audit WHERE action = $1', [action])).toBe(rowsBefore + (changed ? 1 : 0));
    if (changed) expect(await count(s, table)).not.toBe(dataBefore);
    else expect(await count(s, table)).toBe(dataBefore);
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
    const row = (await s.platform.db.query(`SELECT * FROM basalt.admin_audit WHERE request_id = 'req-audit-1'`))
      .rows[0] as any;
    expect(row).toMatchObject({
      admin_id: a.admin.id,
      admin_email: a.email,
      ip: '127.0.0.1',
      user_agent: 'panel-test',
      action: 'keys.create',
      target: r.body.data.key.id,
    });
    expect(JSON.stringify(row)).not.toContain(r.body.data.secret);
    const inserted = (
      await s.platform.db.query(
        `SELECT diff FROM basalt.admin_audit WHERE action = 'data.insert' ORDER BY id DESC LIMIT 1`,
      )
    ).rows[0] as any;
    expect(inserted.diff.data).toEqual({ id: 1, body: 'first', password: '[redacted]' });
    await adminReq(s, a, 'PUT', '/api/admin/settings/auth.jwt_secret', {
      value: 'a-very-long-secret-value-of-more-than-32-chars',
    });
    const secret = (
      await s.platform.db.query(
        `SELECT diff FROM basalt.admin_audit WHERE action = 'settings.set' AND target = 'auth.jwt_secret'`,
      )
    ).rows[0] as any;
    expect(secret.diff).toEqual({ before: null, after: '[redacted]' });
    await adminReq(s, a, 'DELETE', '/api/admin/settings/auth.jwt_secret');
  });

  test('when the audit row cannot be written, the change does not happen either (one transaction)', async () => {
    await s.platform.db.exec(`CREATE FUNCTION public.refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$;
      CREATE TRIGGER refuse_audit BEFORE INSERT ON basalt.admin_audit FOR EACH ROW WHEN (NEW.action = 'keys.create') EXECUTE FUNCTION public.refuse_audit();`);
    try {
      const before = await count(s, 'basalt.api_keys');
      const r = await adminReq(s, a, 'POST', '/api/admin/keys', { type: 'public' });
      expect(r.status).toBe(500);
      expect(r.text).not.toContain('audit refused');
      expect(await count(s, 'basalt.api_keys')).toBe(before);
    } finally {
      await s.platform.db.exec('DROP TRIGGER refuse_audit ON basalt.admin_audit; DROP FUNCTION public.refuse_audit();');
    }
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
    const { rows } = await s.platform.db.query<{ n: number }>('SELECT count(*)::int AS n FROM basalt.admin_audit');
    expect(seen.length).toBe(rows[0]!.n);
  });

  test('sign-in success and failure, logout and password change are audited; the log itself cannot be changed through the API', async () => {
    for (const action of ['auth.login', 'admins.create'])
      expect(await count(s, 'basalt.admin_audit WHERE action = $1', [action])).toBeGreaterThan(0);
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH'])
      expect((await adminReq(s, a, method, '/api/admin/audit', {})).status).toBe(404);
  });

  test('retention: rows older than admin.audit_retention_days are deleted in batches; newer ones stay', async () => {
    await s.platform.db.query(
      `INSERT INTO basalt.admin_audit (at, action, target) SELECT now() - interval '91 days', 'old.entry', g::text FROM generate_series(1, 2500) g`,
    );
    await s.platform.db.query(
      `INSERT INTO basalt.admin_audit (at, action, target) VALUES (now() - interval '89 days', 'recent.entry', 'kept')`,
    );
    const deleted = await pruneAudit(s.platform.db, 90, 1000);
    expect(deleted).toBe(2500);
    expect(await count(s, `basalt.admin_audit WHERE action = 'old.entry'`)).toBe(0);
    expect(await count(s, `basalt.admin_audit WHERE action = 'recent.entry'`)).toBe(1);
    // The service's housekeeping reads the live setting.
    await s.platform.settings.set('admin.audit_retention_days', 30);
    try {
      expect(await s.platform.services.admin.prune()).toBe(1);
    } finally {
      await s.platform.settings.unset('admin.audit_retention_days');
    }
  });
});
