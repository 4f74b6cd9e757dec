import { describe, expect, test } from 'bun:test';
import { ADMIN_URL, freshDb } from '../helpers/engines';
import { startServer } from '../helpers/server';
import { tcpProxy } from '../helpers/tcp-proxy';

describe.skipIf(!ADMIN_URL)('database going away (external PostgreSQL)', () => {
  test('answers 503 database_unavailable while it is away and recovers without a restart', async () => {
    const db = await freshDb('external');
    const target = new URL(db.url);
    const proxy = tcpProxy(target.hostname, Number(target.port || 5432));
    const viaProxy = new URL(db.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const s = await startServer('external', { db: { ...db, env: { ...db.env, BASALT_DATABASE_URL: viaProxy.toString() } } });
    try {
      expect((await s.req('GET', '/readyz')).status).toBe(200);
      proxy.cut();
      const down = await s.req('GET', '/readyz');
      expect(down.status).toBe(503);
      expect(down.body).toEqual({ success: false, error: { code: 'database_unavailable', message: 'The database is unavailable; retry shortly.' } });
      // Liveness does not depend on the database.
      expect((await s.req('GET', '/healthz')).status).toBe(200);
      proxy.restore();
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = (await s.req('GET', '/readyz')).status;
        if (status !== 200) await Bun.sleep(100);
      }
      expect(status).toBe(200);
    } finally {
      proxy.restore();
      await s.stop();
      proxy.stop();
      await db.drop();
    }
  });
});
