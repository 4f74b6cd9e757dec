/**
 * The headline cases on the compiled executable, both engines: a table turned on in a
 * migration, a key made with the CLI, a change through the Database API arriving on the
 * stream, a resume, a ticket used once, a refused table, and a stop that ends the streams
 * (the process exits 0 with a client still connected).
 */
import { describe, expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINES, freshDb } from '../helpers/engines';
import { installBinary, serveBinary } from '../helpers/binary';
import { createKeyByCli } from '../helpers/keys';
import { openSse } from './sse';

describe.each(ENGINES)('realtime from the compiled executable on %s', (engine) => {
  test('stream, resume, ticket, refusal, and a stop with a client connected', async () => {
    const { dir, exe } = await installBinary();
    const db = await freshDb(engine);
    const env: Record<string, string> = engine === 'external' ? { BASALT_DATABASE_URL: db.url } : {};
    mkdirSync(join(dir, 'migrations'));
    writeFileSync(
      join(dir, 'migrations', '001_notes.sql'),
      `CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL);
       CREATE TABLE other (id serial PRIMARY KEY);
       SELECT basalt.realtime_enable('notes');`,
    );
    const { key } = await createKeyByCli(exe, dir, env, {
      service: 'rt',
      permissions: ['db:query'],
      tables: ['notes'],
    });
    const { proc, url } = await serveBinary(exe, dir, env);
    try {
      const h = { 'x-api-key': key };
      const insert = (body: string) =>
        fetch(`${url}/api/v1/db/query`, {
          method: 'POST',
          headers: { ...h, 'content-type': 'application/json' },
          body: JSON.stringify({ entity: 'notes', action: 'insert', data: { body } }),
        });
      const c = await openSse(`${url}/api/v1/realtime?tables=notes`, h);
      expect(c.status).toBe(200);
      expect((await insert('one')).status).toBe(200);
      const [one] = await c.waitFor(1);
      expect(one!.data).toEqual({ table: 'notes', action: 'insert', row: { id: 1, body: 'one' } });
      c.close();
      await insert('two');
      const resumed = await openSse(`${url}/api/v1/realtime?tables=notes`, { ...h, 'last-event-id': one!.id! });
      expect((await resumed.waitFor(1))[0]!.data.row.body).toBe('two');

      const refused = await openSse(`${url}/api/v1/realtime?tables=other`, h);
      expect(refused.status).toBe(403);
      const t = await (await fetch(`${url}/api/v1/realtime/ticket`, { method: 'POST', headers: h })).json();
      const byTicket = await openSse(`${url}/api/v1/realtime?tables=notes&ticket=${t.data.ticket}`);
      expect(byTicket.status).toBe(200);
      expect((await openSse(`${url}/api/v1/realtime?tables=notes&ticket=${t.data.ticket}`)).status).toBe(401);

      // A stop ends the streams instead of waiting for them.
      proc.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      await Promise.all([resumed.ended, byTicket.ended]);
    } finally {
      if (proc.exitCode === null) proc.kill('SIGKILL');
      await db.drop();
    }
  });
});
