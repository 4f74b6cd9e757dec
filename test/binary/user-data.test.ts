/**
 * Users' own data from the compiled executable (docs/database.md, "Users' own data"), on
 * both engines: the headline cases over HTTP against `basalt serve` with the docs' notes
 * example as the operator's migration.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { installBinary, serveBinary } from '../helpers/binary';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { USER_PASSWORD, userEmail } from '../helpers/users';
import { NOTES_MIGRATION } from '../database/user-data.fixtures';
import { createKeyByCli } from '../helpers/keys';

describe.each(ENGINES)("users' own data from the executable on %s", (engine) => {
  let dir: string;
  let exe: string;
  let db: FreshDb | undefined;
  let server: Awaited<ReturnType<typeof serveBinary>>;
  let env: Record<string, string>;
  const users: { id: string; token: string }[] = [];
  let service: string;

  const call = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const r = await fetch(server.url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return { status: r.status, body: (await r.json()) as any };
  };
  const as = (i: number) => ({ authorization: `Bearer ${users[i]!.token}` });
  const notes = (headers: Record<string, string>, body: Record<string, unknown>) =>
    call('/api/v1/db/query', { entity: 'notes', ...body }, headers);

  beforeAll(async () => {
    ({ dir, exe } = await installBinary());
    mkdirSync(join(dir, 'migrations'));
    writeFileSync(join(dir, 'migrations', '001_notes.sql'), NOTES_MIGRATION);
    db = engine === 'external' ? await freshDb('external') : undefined;
    env = {
      BASALT_LOG_LEVEL: 'warn',
      BASALT_MIGRATIONS_DIR: join(dir, 'migrations'),
      ...(db ? { BASALT_DATABASE_URL: db.url } : {}),
    };
    server = await serveBinary(exe, dir, env, 120_000);
    for (let i = 0; i < 2; i++) {
      const email = userEmail('exe');
      const ip = { 'x-forwarded-for': `100.99.0.${i + 1}` };
      expect((await call('/api/v1/auth/register', { email, password: USER_PASSWORD }, ip)).status).toBe(201);
      const l = await call('/api/v1/auth/login', { email, password: USER_PASSWORD }, ip);
      expect(l.status).toBe(200);
      users.push({ id: l.body.data.user.id, token: l.body.data.access_token });
    }
    ({ key: service } = await createKeyByCli(exe, dir, env, {
      service: 'app',
      permissions: ['db:query'],
      tables: ['notes'],
    }));
  }, 240_000);
  afterAll(async () => {
    server?.proc.kill('SIGKILL');
    await server?.proc.exited;
    await db?.drop();
  });

  test('two users and anon, each under the policies', async () => {
    expect((await notes(as(0), { action: 'insert', data: { body: 'a1' } })).status).toBe(200);
    expect((await notes(as(0), { action: 'insert', data: { body: 'a2', shared: true } })).status).toBe(200);
    const b = await notes(as(1), { action: 'insert', data: { body: 'b1' }, fields: ['owner_id'] });
    expect(b.body.data.rows).toEqual([{ owner_id: users[1]!.id }]);
    const bodies = async (h: Record<string, string>) =>
      (await notes(h, { action: 'select', fields: ['body'], sort: [{ field: 'id' }] })).body.data.rows.map(
        (r: { body: string }) => r.body,
      );
    expect(await bodies(as(0))).toEqual(['a1', 'a2']);
    expect(await bodies(as(1))).toEqual(['a2', 'b1']);
    expect(await bodies({})).toEqual(['a2']);
    expect(await bodies({ 'x-api-key': service })).toEqual(['a1', 'a2', 'b1']);
  });

  test('refusals: WITH CHECK, hidden rows, column grants, tables not granted', async () => {
    const forged = await notes(as(1), { action: 'insert', data: { body: 'x', owner_id: users[0]!.id } });
    expect(forged.status).toBe(403);
    expect(forged.body.error).toMatchObject({ code: 'forbidden', details: { entity: 'notes' } });
    const hidden = await notes(as(1), { action: 'delete', filters: [{ field: 'body', op: 'eq', value: 'a1' }] });
    expect(hidden).toEqual({ status: 200, body: { success: true, data: { rows: [], count: 0 } } });
    const column = await call('/api/v1/db/query', { entity: 'posts', action: 'select', fields: ['secret'] });
    expect(column.status).toBe(403);
    expect(column.body.error).toMatchObject({ code: 'forbidden', details: { column: 'secret' } });
    const table = await call('/api/v1/db/query', { entity: 'hidden', action: 'select' }, as(0));
    expect(table.status).toBe(403);
    expect((await call('/api/v1/db/query', { entity: 'hidden', action: 'select' })).status).toBe(401);
  });

  test("a user's transaction is theirs alone", async () => {
    const begun = await call('/api/v1/db/transaction/begin', {}, as(0));
    expect(begun.status).toBe(200);
    const id = begun.body.data.transaction_id;
    expect((await notes(as(0), { action: 'insert', data: { body: 'a3' }, transaction_id: id })).status).toBe(200);
    expect((await notes(as(1), { action: 'select', transaction_id: id })).status).toBe(404);
    expect((await call(`/api/v1/db/transaction/${id}/commit`, {}, as(1))).status).toBe(404);
    expect((await call(`/api/v1/db/transaction/${id}/commit`, {}, as(0))).status).toBe(200);
    const mine = await notes(as(0), {
      action: 'select',
      fields: ['body'],
      filters: [{ field: 'body', op: 'eq', value: 'a3' }],
    });
    expect(mine.body.data.count).toBe(1);
  });
});
