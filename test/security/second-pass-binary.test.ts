/**
 * The security second pass on the compiled executable, on both engines: an outsider's
 * wrong passwords lock out only their own address and `basalt admin unlock` (through the
 * running server on the embedded engine) lifts it; `basalt admin --help` lists the
 * commands; the admin API refuses settings that would brick or widen the next start;
 * CSV export neutralises formulas; `/metrics` is for this machine; runtime config does
 * not echo a foreign Host; a mail jobs cursor that is not one is a 400. The in-process
 * suites beside this one hold the details.
 */
import { describe, expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINES, freshDb } from '../helpers/engines';
import { installBinary, runBinary, serveBinary } from '../helpers/binary';
import { rawRequest, requestText } from './raw-http';

const PASSWORD = 'admin password 1234';

describe.each(ENGINES)('security second pass on the executable (%s)', (engine) => {
  test('lockout per address, admin unlock, settings refusals, CSV, metrics, runtime config, mail cursor', async () => {
    const { dir, exe } = await installBinary();
    const db = engine === 'external' ? await freshDb('external') : undefined;
    const migrations = join(dir, 'migrations');
    mkdirSync(migrations);
    writeFileSync(
      join(migrations, '001.sql'),
      `CREATE TABLE cells (id integer PRIMARY KEY, t text); INSERT INTO cells VALUES (1, '=cmd|'' /C calc''!A0'), (2, '-2+3');`,
    );
    const env: Record<string, string> = {
      BASALT_WEB_TRUSTED_PROXIES: '127.0.0.1',
      BASALT_AUTH_LOCKOUT_THRESHOLD: '3',
      BASALT_MIGRATIONS_DIR: migrations,
      BASALT_LOG_LEVEL: 'warn',
      ...(db ? { BASALT_DATABASE_URL: db.url } : {}),
    };
    const help = await runBinary(exe, ['admin', '--help'], dir, env);
    expect(help.code).toBe(0);
    for (const c of ['create', 'list', 'passwd', 'unlock', 'delete'])
      expect(help.stdout).toContain(`basalt admin ${c}`);
    expect(
      (await runBinary(exe, ['admin', 'create', '--email', 'ops@example.com', '--password', PASSWORD], dir, env)).code,
    ).toBe(0);

    const { proc, url } = await serveBinary(exe, dir, env, 120_000);
    try {
      const login = (password: string, from: string) =>
        fetch(`${url}/api/admin/auth/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin', 'x-forwarded-for': from },
          body: JSON.stringify({ email: 'ops@example.com', password }),
        });
      // An outsider locks out only their own address.
      for (let i = 0; i < 3; i++) expect((await login('wrong password 123', '198.51.100.66')).status).toBe(401);
      const locked = await login(PASSWORD, '198.51.100.66');
      expect(locked.status).toBe(429);
      expect((await locked.json()).error.code).toBe('account_locked');
      const ok = await login(PASSWORD, '203.0.113.10');
      expect(ok.status).toBe(200);
      const cookie = ok.headers.get('set-cookie')!.split(';')[0]!;
      const csrf = (await ok.json()).data.csrf_token as string;
      const headers = {
        cookie,
        'x-csrf-token': csrf,
        'sec-fetch-site': 'same-origin',
        'content-type': 'application/json',
        'x-forwarded-for': '203.0.113.10',
      };
      const api = (method: string, path: string, body?: unknown) =>
        fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });

      const admins = (await (await api('GET', '/api/admin/admins')).json()).data.admins;
      expect(admins[0].lock.sources).toEqual([expect.objectContaining({ ip: '198.51.100.66' })]);
      const listed = await runBinary(exe, ['admin', 'list'], dir, env);
      expect(listed.stdout).toContain('failing from 198.51.100.66');
      const unlock = await runBinary(exe, ['admin', 'unlock', 'ops@example.com'], dir, env);
      expect({ code: unlock.code, out: unlock.stdout.trim() }).toEqual({
        code: 0,
        out: expect.stringMatching(/^sign-in of ops@example\.com unlocked/),
      });
      expect((await login(PASSWORD, '198.51.100.66')).status).toBe(200);

      // Settings that would brick or widen the next start.
      const schema = await api('PUT', '/api/admin/settings/database.data_schema', { value: 'basalt' });
      expect(schema.status).toBe(400);
      const dirSetting = await api('PUT', '/api/admin/settings/extensions.dir', { value: '/tmp' });
      expect(dirSetting.status).toBe(403);
      expect((await dirSetting.json()).error.code).toBe('setting_operator_only');

      // CSV: formulas neutralised by default, as stored on request.
      const csv = await (await api('GET', '/api/admin/data/cells/export.csv')).text();
      expect(csv).toBe("id,t\r\n1,'=cmd|' /C calc'!A0\r\n2,'-2+3\r\n");
      const kept = await (await api('GET', '/api/admin/data/cells/export.csv?formulas=keep')).text();
      expect(kept).toBe("id,t\r\n1,=cmd|' /C calc'!A0\r\n2,-2+3\r\n");

      // Mail jobs: a cursor that is not one.
      const jobs = await api('GET', '/api/admin/mail/jobs?before=garbage');
      expect(jobs.status).toBe(400);
      expect((await jobs.json()).error.details.fields.before).toEqual(expect.any(String));

      // /metrics: this machine only.
      expect((await fetch(`${url}/metrics`)).status).toBe(200);
      expect((await fetch(`${url}/metrics`, { headers: { 'x-forwarded-for': '198.51.100.7' } })).status).toBe(403);

      // Runtime config with a foreign Host: the listener's own address.
      const raw = await rawRequest(
        url,
        requestText('GET', '/api/v1/public/runtime-config', [['Host', 'evil.example']]),
      );
      expect(JSON.parse(raw.responses[0]!.body).data.api_base_url).toBe(`${url}/api`);
    } finally {
      proc.kill('SIGTERM');
      await proc.exited;
      await db?.drop();
    }
  }, 400_000);
});
