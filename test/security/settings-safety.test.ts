/**
 * Settings that would stop the next start or widen what is exposed (docs/configuration.md,
 * "Validation"): a platform schema as `database.data_schema` is refused everywhere; a
 * stored value refused by the rules stops `serve` with the fix in the line, and
 * `settings unset` always runs; `extensions.dir`, `migrations.dir`, `web.host` and
 * `web.metrics_access` are the operator's (403 from the admin API). Before, the admin API
 * stored `database.data_schema=basalt`, after which neither `serve` nor `settings unset` ran.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { runCli } from '../helpers/cli';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { startAdminServer } from '../admin/support';
import { expectAError } from '../helpers/envelopes';
import { openPlatform } from '../../src/platform';

describe.each(ENGINES)('settings that brick or widen the next start, on %s', (engine) => {
  test('a stored platform schema stops start-up naming the fix; settings unset repairs it; settings set refuses it', async () => {
    const db = await freshDb(engine);
    try {
      const env = { ...db.env, BASALT_LOG_LEVEL: 'silent' };
      const p = await openPlatform({ env, migrate: true });
      // As an older version (or a hand-written row) left it.
      await p.db.query(`INSERT INTO basalt.settings (key, value) VALUES ('database.data_schema', '"basalt"')`);
      await p.shutdown();

      const broken = await runCli(['migrate'], db.env);
      expect(broken.code).toBe(1);
      expect(broken.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(
          /^basalt: stored setting: database\.data_schema refused: 'basalt' is a platform schema .*; remove it with 'basalt settings unset database\.data_schema'$/,
        ),
      ]);
      const get = await runCli(['settings', 'get', 'database.data_schema'], db.env);
      expect(get.code).toBe(0);
      expect(get.stdout).toContain('database.data_schema = "public"');
      expect(get.stderr).toContain("'basalt' is a platform schema");

      const unset = await runCli(['settings', 'unset', 'database.data_schema'], db.env);
      expect({ code: unset.code, stdout: unset.stdout.trim() }).toEqual({
        code: 0,
        stdout: 'database.data_schema unset',
      });
      const refused = await runCli(['settings', 'set', 'database.data_schema', 'pg_catalog'], db.env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("database.data_schema refused: 'pg_catalog' is a platform schema");
      // The environment is checked the same way, before anything opens.
      const fromEnv = await runCli(['migrate'], { ...db.env, BASALT_DATABASE_DATA_SCHEMA: 'basalt' });
      expect(fromEnv.code).toBe(1);
      expect(fromEnv.stderr).toContain('BASALT_DATABASE_DATA_SCHEMA: database.data_schema refused');

      // Widening the listener from the CLI is allowed, and said out loud.
      const host = await runCli(['settings', 'set', 'web.host', '0.0.0.0'], db.env);
      expect(host.code).toBe(0);
      expect(host.stderr).toContain('web.host 0.0.0.0 is reachable from other machines');
      // And the repaired database opens.
      await (await openPlatform({ env, migrate: true })).shutdown();
    } finally {
      await db.drop();
    }
  }, 240_000);

  describe('through the admin API', () => {
    let s: TestServer;
    let a: AdminAuth;
    beforeAll(async () => {
      // extensions.dir at its default, as an operator who never set it has it (empty is unset; the
      // executable's harness would otherwise pin it to the repository's extensions).
      s = await startAdminServer(engine, { env: { BASALT_EXTENSIONS_DIR: '' } });
      a = await signInAdmin(s);
    }, 180_000);
    afterAll(() => s.stop());
    /** Where the setting's value comes from, as the admin API lists it. */
    const sourceOf = async (key: string) =>
      (await adminReq(s, a, 'GET', '/api/admin/settings')).body.data.settings.find((x: any) => x.key === key).source;

    test.each([
      'basalt',
      'pg_catalog',
      'information_schema',
      'ext_media',
    ])('database.data_schema = %s → 400 naming why; nothing stored', async (schema) => {
      const r = await adminReq(s, a, 'PUT', '/api/admin/settings/database.data_schema', { value: schema });
      expectAError(r, 400, 'validation_error', {
        details: { fields: { 'database.data_schema': expect.stringContaining('is a platform schema') } },
      });
      expect(await sourceOf('database.data_schema')).toBe('default');
    });

    test.each([
      ['extensions.dir', '/tmp/anywhere', 'the code in it is loaded at the next start'],
      ['migrations.dir', '/tmp/anywhere', 'the SQL files in it run at the next start'],
      ['web.host', '0.0.0.0', 'it decides which networks reach both listeners'],
      ['web.metrics_access', 'open', 'it decides who outside this machine reads the metrics'],
    ])('%s is the operator’s: 403 setting_operator_only naming why', async (key, value, why) => {
      const r = await adminReq(s, a, 'PUT', `/api/admin/settings/${key}`, { value });
      expectAError(r, 403, 'setting_operator_only', {
        message: `${key} can be changed only where the process is run (basalt settings set, the environment or the config file): ${why}.`,
      });
      expect(await sourceOf(key)).toBe('default');
      const listed = (await adminReq(s, a, 'GET', '/api/admin/settings')).body.data.settings.find(
        (x: any) => x.key === key,
      );
      expect(listed.operator_only).toBe(why);
      // Removing a stored value only undoes: allowed.
      expect((await adminReq(s, a, 'DELETE', `/api/admin/settings/${key}`)).status).toBe(200);
    });

    test('backup.schedule more often than every 5 minutes → 400; every 5m is fine', async () => {
      const r = await adminReq(s, a, 'PUT', '/api/admin/settings/backup.schedule', { value: 'every 1s' });
      expectAError(r, 400, 'validation_error', {
        details: { fields: { 'backup.schedule': expect.stringContaining('more often than every 5 minutes') } },
      });
      expect((await adminReq(s, a, 'PUT', '/api/admin/settings/backup.schedule', { value: 'every 5m' })).status).toBe(
        200,
      );
      expect((await adminReq(s, a, 'DELETE', '/api/admin/settings/backup.schedule')).status).toBe(200);
    });
  });
});
