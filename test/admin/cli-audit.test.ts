/**
 * Changes made on the command line are in the audit log like the panel's (docs/admin.md
 * "Audit log"): `basalt settings set|unset`, `keys create|revoke`, `templates put|delete`,
 * `admin create`, run with the compiled executable beside a serving instance (on the
 * embedded engine the command runs inside it, over the data dir's socket; on external
 * PostgreSQL it opens the database itself). Actor 'cli' with the OS user; targets can be
 * found by name or e-mail; settings and templates keep old → new values.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { installBinary, runBinary, serveBinary } from '../helpers/binary';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';

const EMAIL = 'ops@example.com';
const PASSWORD = 'correct horse battery staple';

describe.each(ENGINES)('CLI changes in the audit log, compiled executable, %s', (engine) => {
  let db: FreshDb | undefined;
  let stop: (() => Promise<unknown>) | undefined;
  afterAll(async () => {
    await stop?.();
    await db?.drop();
  });

  test('settings, keys, templates and admin commands run beside a serving instance are audited', async () => {
    const { dir, exe } = await installBinary();
    db = engine === 'external' ? await freshDb('external') : undefined;
    const env: Record<string, string> = db ? { BASALT_DATABASE_URL: db.url } : {};
    const s = await serveBinary(exe, dir, env, 300_000); // a fresh embedded database: slow on a loaded machine
    stop = async () => {
      s.proc.kill('SIGTERM');
      await s.proc.exited;
    };
    const cli = async (...args: string[]) => {
      const r = await runBinary(exe, args, dir, env);
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: expect.any(String) });
      return r;
    };
    await cli('admin', 'create', '--email', EMAIL, '--password', PASSWORD);
    await cli('settings', 'set', 'app.name', 'Shop from the shell');
    await cli('settings', 'unset', 'app.name');
    const created = JSON.parse(
      (
        await cli(
          'keys',
          'create',
          '--type',
          'service',
          '--service',
          'crm',
          '--permissions',
          'mail:send',
          '--name',
          'nightly sync',
          '--json',
        )
      ).stdout,
    );
    await cli('keys', 'revoke', created.id);
    writeFileSync(join(dir, 'hello.txt'), 'Hello {{ name }}');
    await cli('templates', 'put', 'cli_hello', '--subject', 'Hello', '--text', join(dir, 'hello.txt'));
    await cli('templates', 'put', 'cli_hello', '--subject', 'Hello again', '--text', join(dir, 'hello.txt'));
    await cli('templates', 'delete', 'cli_hello');

    const login = await fetch(s.url + '/api/admin/auth/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: EMAIL, password: PASSWORD }),
    });
    expect(login.status).toBe(200);
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    const audit = async (q: string) => {
      const r = await fetch(`${s.url}/api/admin/audit?${q}`, { headers: { cookie } });
      expect(r.status).toBe(200);
      return (await r.json()).data.entries as any[];
    };

    const cliRows = await audit('admin=cli');
    expect(cliRows.map((e) => e.action).reverse()).toEqual([
      'admins.create',
      'settings.set',
      'settings.unset',
      'keys.create',
      'keys.revoke',
      'templates.put',
      'templates.put',
      'templates.delete',
    ]);
    // Who ran the commands, as the system names the account (Bun's userInfo() may say 'unknown').
    const user = Bun.spawnSync(['id', '-un']).stdout.toString().trim();
    expect(user).not.toBe('');
    for (const e of cliRows) {
      expect(e).toMatchObject({ actor: 'cli', os_user: user, admin_id: null, user_agent: 'basalt cli' });
    }
    const set = cliRows.find((e) => e.action === 'settings.set');
    expect(set).toMatchObject({ target: 'app.name', diff: { before: null, after: 'Shop from the shell' } });
    const unset = cliRows.find((e) => e.action === 'settings.unset');
    expect(unset.diff).toEqual({ before: 'Shop from the shell', after: null });
    const second = cliRows.find((e) => e.action === 'templates.put' && !e.diff.created);
    expect(second.diff.subject).toEqual({ before: 'Hello', after: 'Hello again' });

    // A bare id as target, but the key is found by its name and its display.
    const byName = await audit('target=' + encodeURIComponent('NIGHTLY sync'));
    expect(byName.map((e) => e.action).sort()).toEqual(['keys.create', 'keys.revoke']);
    expect(byName.every((e) => e.target === created.id)).toBe(true);
    expect((await audit('target=' + encodeURIComponent(created.display))).length).toBe(2);
    // The administrator by e-mail; a wildcard in the search is a literal character.
    expect((await audit('target=ops%40example')).map((e) => e.action)).toContain('admins.create');
    expect(await audit('target=' + encodeURIComponent('%'))).toEqual([]);
    // The panel's own sign-in is an administrator's entry, not the command line's.
    expect((await audit('action=auth.login'))[0]).toMatchObject({ actor: 'admin', admin_email: EMAIL, os_user: null });
  }, 600_000);
});
