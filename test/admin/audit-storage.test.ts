/**
 * The audit log in the database (docs/admin-api.md §Audit log): when its row cannot be
 * written, the change does not happen either (one transaction); old rows go in batches.
 * On the source only: a trigger that refuses the row, old rows written directly and the
 * prune run at once need the database and the service in this process (the executable's
 * embedded database lives inside it). The HTTP side of the audit log: audit.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { pruneAudit } from '../../src/modules/admin/audit';
import { startAdminServer } from './support';

const count = async (s: TestServer, sql: string) =>
  (await s.platform.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`)).rows[0]!.n;

describe.each(ENGINES)('admin audit log storage on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  beforeAll(async () => {
    s = await startAdminServer(engine);
    a = await signInAdmin(s);
  }, 60_000);
  afterAll(() => s.stop());

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
