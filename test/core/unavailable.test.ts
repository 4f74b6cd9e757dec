import { describe, expect, test } from 'bun:test';
import { ADMIN_URL, freshDb } from '../helpers/engines';
import { startServer } from '../helpers/server';
import { tcpProxy } from '../helpers/tcp-proxy';
import { createKey } from '../helpers/keys';
import { registerUser } from '../helpers/users';
import { expectFormatError } from '../helpers/envelopes';
import { eventually } from '../helpers/wait';

const MESSAGE = 'The database is unavailable; retry shortly.';

/** Real area routes, each with what it answers while the database is away and once it is back. */
function scenarios(dbKey: string, mailKey: string) {
  return [
    {
      name: 'login (auth, format A)',
      method: 'POST',
      path: '/api/v1/auth/login',
      body: { email: 'ann@example.com', password: 'correct horse battery' },
      headers: {},
      format: 'A',
      back: 200,
    },
    {
      name: 'database query with a key (format A)',
      method: 'POST',
      path: '/api/v1/db/query',
      body: { action: 'select', entity: 'notes' },
      headers: { 'x-api-key': dbKey },
      format: 'A',
      back: 200,
    },
    {
      name: 'mail send (format B)',
      method: 'POST',
      path: '/api/v1/mail/send',
      body: { to: ['bob@example.com'], subject: 'Hi', text: 'Hello' },
      headers: { 'x-api-key': mailKey },
      format: 'B',
      back: 202,
    },
    { name: 'readiness', method: 'GET', path: '/readyz', body: undefined, headers: {}, format: 'A', back: 200 },
  ] as const;
}

describe.skipIf(!ADMIN_URL)('database going away (external PostgreSQL)', () => {
  test('area routes answer 503 database_unavailable in their envelopes while it is away, and recover without a restart', async () => {
    const db = await freshDb('external');
    const target = new URL(db.url);
    const proxy = tcpProxy(target.hostname, Number(target.port || 5432));
    const viaProxy = new URL(db.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const s = await startServer('external', {
      db: { ...db, env: { ...db.env, BASALT_DATABASE_URL: viaProxy.toString() } },
    });
    try {
      await s.platform.db.query('CREATE TABLE public.notes (id serial PRIMARY KEY, body text)');
      await s.platform.db.query(`INSERT INTO public.notes (body) VALUES ('one')`);
      await s.platform.settings.set('mail.smtp_url', 'smtp://127.0.0.1:1');
      await s.platform.settings.set('mail.from', 'platform@example.com');
      const dbKey = await createKey(s, { permissions: ['db:query'], tables: ['notes'] });
      const mailKey = await createKey(s, { permissions: ['mail:send'] });
      await registerUser(s, { email: 'ann@example.com', password: 'correct horse battery' });
      const table = scenarios(dbKey, mailKey);
      for (const sc of table)
        expect([sc.path, (await s.req(sc.method, sc.path, { body: sc.body, headers: sc.headers })).status]).toEqual([
          sc.path,
          sc.back,
        ]);

      proxy.cut();
      for (const sc of table) {
        const r = await s.req(sc.method, sc.path, { body: sc.body, headers: sc.headers });
        expect([sc.path, r.status]).toEqual([sc.path, 503]);
        expectFormatError(sc.format, r, 503, 'database_unavailable', { message: MESSAGE });
      }
      // Liveness does not depend on the database.
      expect((await s.req('GET', '/healthz')).status).toBe(200);

      proxy.restore();
      for (const sc of table) {
        const back = async () =>
          (await s.req(sc.method, sc.path, { body: sc.body, headers: sc.headers })).status === sc.back;
        const ok = await eventually(back, { timeout: 5000, interval: 100 }).catch(() => false);
        expect([sc.path, ok]).toEqual([sc.path, true]);
      }
      const rows = await s.req('POST', '/api/v1/db/query', {
        body: { action: 'select', entity: 'notes' },
        headers: { 'x-api-key': dbKey },
      });
      expect(rows.body.data.rows).toEqual([{ id: 1, body: 'one' }]);
    } finally {
      proxy.restore();
      await s.stop();
      proxy.stop();
      await db.drop();
    }
  }, 60_000);
});
