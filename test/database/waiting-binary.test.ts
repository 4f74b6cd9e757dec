/**
 * The headline case of docs/database.md "Waiting for the database" (./waiting-scenario.ts)
 * on the compiled executable, alone in an empty directory, on both engines: one key
 * holds a transaction and queues begins (some whose client gives up); an administrator,
 * a site user and another key are answered within the bound; the abandoned begins never
 * start; revoking the key answers in well under a second. External PostgreSQL runs with
 * database.pool_max = 2, so two keys would fill the Database API pool.
 */
import { describe, expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINES, freshDb } from '../helpers/engines';
import { installBinary, runBinary, serveBinary } from '../helpers/binary';
import { createKeyByCli } from '../helpers/keys';
import { holdAndQueue } from './waiting-scenario';

const PASSWORD = 'admin password 1234';

describe.each(ENGINES)('the executable on %s', (engine) => {
  test('one key holding and queueing transactions holds up neither the platform nor another key', async () => {
    const { dir, exe } = await installBinary();
    mkdirSync(join(dir, 'migrations'));
    writeFileSync(
      join(dir, 'migrations', '001_marks.sql'),
      'CREATE TABLE marks (id serial PRIMARY KEY, who text NOT NULL);\n',
    );
    const db = engine === 'external' ? await freshDb('external') : undefined;
    const env: Record<string, string> = db ? { BASALT_DATABASE_URL: db.url, BASALT_DATABASE_POOL_MAX: '2' } : {};
    const { proc, url } = await serveBinary(exe, dir, env, 120_000);
    try {
      const cli = async (...args: string[]) => {
        const r = await runBinary(exe, args, dir, env);
        expect({ args, code: r.code, err: r.stderr }).toEqual({ args, code: 0, err: '' });
        return r.stdout;
      };
      const newKey = () =>
        createKeyByCli(exe, dir, env, { service: 'w', permissions: ['db:query'], tables: ['marks'] });
      const holder = await newKey();
      const other = (await newKey()).key;
      await cli('admin', 'create', '--email', 'ops@example.com', '--password', PASSWORD);
      const login = await fetch(`${url}/api/admin/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' },
        body: JSON.stringify({ email: 'ops@example.com', password: PASSWORD }),
      });
      expect(login.status).toBe(200);
      const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
      const csrf = (await login.json()).data.csrf_token;
      const admin = { cookie, 'x-csrf-token': csrf, 'sec-fetch-site': 'same-origin' };
      const user = { email: 'site-user@example.com', password: 'correct horse battery' };
      const post = (path: string, body: unknown) =>
        fetch(url + path, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      expect((await post('/api/v1/auth/register', user)).status).toBe(201);
      const signedIn = await (await post('/api/v1/auth/login', user)).json();
      const bearer = { authorization: `Bearer ${signedIn.data.access_token}` };

      const measured = await holdAndQueue({ main: url, pub: url, holder, other, admin, user: bearer });
      console.log(`waiting for the database, executable on ${engine}:`, JSON.stringify(measured));
    } finally {
      proc.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      await db?.drop();
    }
  }, 240_000);
});
