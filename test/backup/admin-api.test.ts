/**
 * The admin API's backup routes (docs/admin-api.md §Backups): list, create (audited),
 * download, delete (audited) on the embedded engine; 409 `not_supported` on external
 * PostgreSQL, with a message pointing at pg_dump and snapshots.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { runPendingRestore } from '../../src/modules/backup/restore-request';
import { startServer, type TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { readManifest } from '../../src/modules/backup/service';
import { expectAError } from '../helpers/envelopes';

describe('admin API backups (embedded)', () => {
  let s: TestServer;
  let a: AdminAuth;
  beforeAll(async () => {
    s = await startServer('embedded');
    a = await signInAdmin(s);
  });
  afterAll(async () => s?.stop());

  test('create, list, download, delete; create and delete are audited', async () => {
    expect((await adminReq(s, a, 'GET', '/api/admin/backups')).body.data.backups).toEqual([]);
    const c = await adminReq(s, a, 'POST', '/api/admin/backups');
    expect(c.status).toBe(201);
    const name = c.body.data.backup.name as string;
    expect(c.body.data.backup).toMatchObject({
      name: expect.stringMatching(/^basalt-.*\.tar\.gz$/),
      trigger: 'admin',
      size: expect.any(Number),
      held_ms: expect.any(Number),
    });
    const list = await adminReq(s, a, 'GET', '/api/admin/backups');
    expect(list.body.data.backups).toEqual([
      expect.objectContaining({ name, trigger: 'admin', platform_version: s.platform.version }),
    ]);

    const dl = await fetch(`${s.url}/api/admin/backups/${name}/download`, { headers: a.headers() });
    expect(dl.status).toBe(200);
    expect(dl.headers.get('content-type')).toBe('application/gzip');
    expect(dl.headers.get('content-disposition')).toBe(`attachment; filename="${name}"`);
    const path = join(s.platform.dataDir, 'backups', name);
    expect(Buffer.from(await dl.arrayBuffer()).equals(readFileSync(path))).toBe(true);
    expect((await readManifest(path))!.trigger).toBe('admin');

    expect((await adminReq(s, a, 'DELETE', `/api/admin/backups/${name}`)).status).toBe(200);
    expect((await adminReq(s, a, 'GET', '/api/admin/backups')).body.data.backups).toEqual([]);
    const audit = await adminReq(s, a, 'GET', '/api/admin/audit?action=backups.');
    expect(
      audit.body.data.entries.map((e: { action: string; target: string; admin_email: string }) => [
        e.action,
        e.target,
        e.admin_email,
      ]),
    ).toEqual([
      ['backups.delete', name, a.email],
      ['backups.create', name, a.email],
    ]);
  });

  test('unknown and malformed names are 404; no session is 401; a cross-site create is refused', async () => {
    for (const n of ['basalt-2001-01-01T00-00-00Z.tar.gz', '..%2Fpg%2FPG_VERSION', 'x']) {
      expect((await fetch(`${s.url}/api/admin/backups/${n}/download`, { headers: a.headers() })).status).toBe(404);
      const d = await adminReq(s, a, 'DELETE', `/api/admin/backups/${n}`);
      expectAError(d, 404, 'not_found');
    }
    expect((await s.req('GET', '/api/admin/backups')).status).toBe(401);
    expect(
      (await adminReq(s, a, 'POST', '/api/admin/backups', undefined, { 'sec-fetch-site': 'cross-site' })).status,
    ).toBe(403);
  });
});

describe('admin API point-in-time restore (embedded)', () => {
  let db: FreshDb;
  let s: TestServer | undefined;
  let a: AdminAuth;
  beforeAll(async () => {
    db = await freshDb('embedded');
    s = await startServer('embedded', { db });
    a = await signInAdmin(s);
  });
  afterAll(async () => {
    await s?.stop();
    for (const f of readdirSync(dirname(db.dataDir)))
      if (f.startsWith(`${basename(db.dataDir)}.before-restore-`))
        rmSync(join(dirname(db.dataDir), f), { recursive: true, force: true });
    await db?.drop();
  });

  test('the window, the checks, a request (audited) that the next start carries out', async () => {
    const pitr = async () => (await adminReq(s!, a, 'GET', '/api/admin/backups')).body.data.pitr;
    expect(await pitr()).toEqual({ window: null, pending: null });
    expectAError(await adminReq(s!, a, 'POST', '/api/admin/backups/restore', { to: 'latest' }), 409, 'conflict', {
      message: expect.stringContaining('no backup to start from'),
    });
    expect((await adminReq(s!, a, 'POST', '/api/admin/backups')).status).toBe(201);
    await s!.platform.db.exec('CREATE TABLE public.after_base (id int); INSERT INTO public.after_base VALUES (1)');
    const window = (await pitr()).window;
    expect(window).toEqual({ from: expect.any(String), to: expect.any(String), bases: 1 });
    for (const to of ['yesterday', '2026-01-01T00:00:00', '2999-01-01T00:00:00Z'])
      expectAError(await adminReq(s!, a, 'POST', '/api/admin/backups/restore', { to }), 400, 'validation_error');
    expectAError(
      await adminReq(s!, a, 'POST', '/api/admin/backups/restore', { to: '2000-01-01T00:00:00Z' }),
      409,
      'conflict',
      { message: expect.stringContaining('before the oldest base backup') },
    );
    const r = await adminReq(s!, a, 'POST', '/api/admin/backups/restore', { to: 'latest' });
    expect({ status: r.status, body: r.body }).toMatchObject({ status: 200 }); // the body says why, if not
    expect(r.body.data).toEqual({ to: 'latest', requested_by: a.email, requested_at: expect.any(String) });
    expect((await pitr()).pending).toEqual(r.body.data);
    const audit = await adminReq(s!, a, 'GET', '/api/admin/audit?action=backups.restore_requested');
    expect(audit.body.data.entries[0]).toMatchObject({ action: 'backups.restore_requested', target: 'latest' });

    // The next start: the request is carried out before the database opens (serve's first step).
    await s!.stop();
    s = undefined;
    const lines: string[] = [];
    await runPendingRestore({ env: db.env }, (l) => lines.push(l));
    expect(lines.join('\n')).toContain('restored to latest');
    expect(existsSync(join(db.dataDir, 'backups', 'restore-request.json'))).toBe(false);
    s = await startServer('embedded', { db });
    // The table made after the base backup came back from the WAL archive.
    expect((await s.platform.db.query('SELECT id FROM public.after_base')).rows).toEqual([{ id: 1 }]);
  }, 120_000);
});

describe.skipIf(!ENGINES.includes('external'))('admin API backups (external)', () => {
  let s: TestServer;
  let a: AdminAuth;
  beforeAll(async () => {
    s = await startServer('external');
    a = await signInAdmin(s);
  });
  afterAll(async () => s?.stop());

  test('every route answers 409 not_supported pointing at pg_dump and snapshots', async () => {
    for (const [method, path] of [
      ['GET', '/api/admin/backups'],
      ['POST', '/api/admin/backups'],
      ['GET', '/api/admin/backups/basalt-2001-01-01T00-00-00Z.tar.gz/download'],
      ['DELETE', '/api/admin/backups/basalt-2001-01-01T00-00-00Z.tar.gz'],
    ] as const) {
      const r = await adminReq(s, a, method, path);
      expectAError(r, 409, 'not_supported', { message: expect.stringContaining('pg_dump') });
      expect(r.body.error.message).toContain('snapshots');
    }
    expectAError(await adminReq(s, a, 'POST', '/api/admin/backups/restore', { to: 'latest' }), 409, 'not_supported');
  });
});
