/**
 * `basalt export-to URL` on a real external database (BASALT_TEST_DATABASE_URL; skipped
 * without it): an embedded site with users, keys, an operator table (identity, foreign
 * key, jsonb, timestamptz, bytea, an updated_at trigger) and an uploaded file's row is
 * copied into an empty database, then served by two instances that see the same users
 * and keys, with identities continuing. A non-empty target and a held data dir are refused.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_URL, freshDb, type FreshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { runCli } from '../helpers/cli';
import { registerUser } from '../helpers/users';

const PASSWORD = 'correct horse battery';
const MIGRATION = `
CREATE TABLE orders (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  customer text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}',
  placed_at timestamptz NOT NULL DEFAULT now(),
  blob bytea,
  parent bigint REFERENCES orders (id),
  updated_at timestamptz
);
CREATE TABLE order_lines (id serial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders (id), qty int NOT NULL);
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.updated_at := now(); RETURN NEW; END $$;
CREATE TRIGGER orders_touch BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION touch();
`;

describe.skipIf(!ADMIN_URL)('export-to an external database', () => {
  const migrations = mkdtempSync(join(tmpdir(), 'basalt-export-migrations-'));
  writeFileSync(join(migrations, '001_orders.sql'), MIGRATION);
  const env = { BASALT_MIGRATIONS_DIR: migrations };
  let embedded: FreshDb;
  let target: FreshDb;
  let a: TestServer;
  let b: TestServer;
  let serviceKey = '';
  let userEmail = '';
  let placedAt = '';
  let updatedAt = '';

  beforeAll(async () => {
    embedded = await freshDb('embedded');
    const s = await startServer('embedded', { db: embedded, env });
    try {
      userEmail = `export-${Date.now()}@example.com`;
      await registerUser(s, { email: userEmail, password: PASSWORD });
      serviceKey = await createKey(s, { permissions: ['db:*', 'files:*'], tables: ['orders', 'order_lines'] });
      await s.platform.db.exec(
        `INSERT INTO orders (customer, details, blob) SELECT 'c' || g, jsonb_build_object('n', g, 's', 'x"y'), '\\x00ff'::bytea FROM generate_series(1, 2500) g`,
      );
      await s.platform.db.exec(`UPDATE orders SET parent = id - 1 WHERE id > 1`);
      await s.platform.db.exec(`INSERT INTO order_lines (order_id, qty) SELECT id, 1 FROM orders`);
      const r = await s.platform.db.query<{ p: string; u: string }>(
        `SELECT placed_at::text AS p, updated_at::text AS u FROM orders WHERE id = 7`,
      );
      placedAt = r.rows[0]!.p;
      updatedAt = r.rows[0]!.u;
      const form = new FormData();
      form.append('file', new Blob(['hello']), 'hello.txt');
      expect(
        (await fetch(`${s.url}/api/v1/files`, { method: 'POST', body: form, headers: { 'x-api-key': serviceKey } }))
          .status,
      ).toBe(201);
    } finally {
      await s.running.stop();
    }
    target = await freshDb('external');
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await target?.drop();
    await embedded?.drop();
    rmSync(migrations, { recursive: true, force: true });
  });

  test('copies every table, prints matching row counts per table', async () => {
    const r = await runCli(
      ['export-to', target.url],
      { BASALT_DATA_DIR: embedded.dataDir, ...env },
      { timeoutMs: 110_000 },
    );
    expect(r.code).toBe(0);
    console.log(r.stdout);
    const rows = r.stdout.split('\n').filter((l) => /^\S+\.\S+\s+\d+\s+\d+$/.test(l));
    const counts = Object.fromEntries(rows.map((l) => l.split(/\s+/)).map(([t, x, y]) => [t, [Number(x), Number(y)]]));
    expect(counts['public.orders']).toEqual([2500, 2500]);
    expect(counts['public.order_lines']).toEqual([2500, 2500]);
    expect(counts['basalt.users']).toEqual([1, 1]);
    expect(counts['basalt.api_keys']).toEqual([1, 1]);
    expect(counts['basalt.schema_migrations']).toEqual([1, 1]);
    expect(counts['ext_media_library.files']).toEqual([1, 1]);
    for (const [, [x, y]] of Object.entries(counts) as [string, number[]][]) expect(y).toBe(x!);
    expect(r.stdout).toMatch(/\d+ tables and \d+ sequences copied in \d+ ms; every row count matches\./);
  });

  test('two instances on the exported database see the same users and keys; identities continue; values exact', async () => {
    a = await startServer('external', { db: target, env });
    b = await startServer('external', { db: target, env });
    for (const s of [a, b]) {
      const login = await s.req('POST', '/api/v1/auth/login', { body: { email: userEmail, password: PASSWORD } });
      expect(login.status).toBe(200);
      const me = await s.req('GET', '/api/v1/auth/me', {
        headers: { authorization: `Bearer ${login.body.data.access_token}` },
      });
      expect(me.body.data.user.email).toBe(userEmail);
      const sel = await s.req('POST', '/api/v1/db/query', {
        headers: { 'x-api-key': serviceKey },
        body: { action: 'select', entity: 'orders', filters: [{ field: 'id', op: 'eq', value: 7 }] },
      });
      expect(sel.status).toBe(200);
      expect(sel.body.data.rows[0]).toMatchObject({ customer: 'c7', details: { n: 7, s: 'x"y' }, parent: '6' });
    }
    // A token issued by one instance is accepted by the other (the JWT secret came along).
    const login = await a.req('POST', '/api/v1/auth/login', { body: { email: userEmail, password: PASSWORD } });
    expect(
      (await b.req('GET', '/api/v1/auth/me', { headers: { authorization: `Bearer ${login.body.data.access_token}` } }))
        .status,
    ).toBe(200);
    const ins = await b.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': serviceKey },
      body: { action: 'insert', entity: 'orders', data: { customer: 'new' } },
    });
    expect(ins.status).toBe(200);
    expect(ins.body.data.rows[0].id).toBe('2501');
    const line = await a.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': serviceKey },
      body: { action: 'insert', entity: 'order_lines', data: { order_id: 2501, qty: 2 } },
    });
    expect(line.body.data.rows[0].id).toBe(2501);
    // Timestamps to the microsecond, and the trigger did not rewrite updated_at during the copy.
    const r = await a.platform.db.query<{ p: string; u: string; blob: Uint8Array }>(
      `SELECT placed_at::text AS p, updated_at::text AS u, blob FROM orders WHERE id = 7`,
    );
    expect(r.rows[0]).toMatchObject({ p: placedAt, u: updatedAt });
    expect([...r.rows[0]!.blob]).toEqual([0, 255]);
    // Foreign keys are back in force.
    const bad = await a.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': serviceKey },
      body: { action: 'insert', entity: 'order_lines', data: { order_id: 999999, qty: 1 } },
    });
    expect(bad.status).toBe(400);
  });

  test('a database that is not empty is refused, naming what is there', async () => {
    const r = await runCli(['export-to', target.url], { BASALT_DATA_DIR: embedded.dataDir, ...env });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^basalt export-to: the target database is not empty \(it has .*\); export-to needs an empty database/,
    );
  });

  test('migrations that differ from what the embedded database applied are refused before the target is touched', async () => {
    const other = await freshDb('external');
    const extra = mkdtempSync(join(tmpdir(), 'basalt-export-migrations-'));
    try {
      writeFileSync(join(extra, '001_orders.sql'), MIGRATION);
      writeFileSync(join(extra, '002_more.sql'), 'CREATE TABLE more (id int);');
      const pending = await runCli(['export-to', other.url], {
        BASALT_DATA_DIR: embedded.dataDir,
        BASALT_MIGRATIONS_DIR: extra,
      });
      expect(pending.code).toBe(1);
      expect(pending.stderr.trim()).toBe(
        "basalt export-to: migrations.dir has 002_more.sql, not yet applied to the embedded database: run 'basalt migrate' first (or move the file away)",
      );
      rmSync(join(extra, '001_orders.sql'));
      rmSync(join(extra, '002_more.sql'));
      const gone = await runCli(['export-to', other.url], {
        BASALT_DATA_DIR: embedded.dataDir,
        BASALT_MIGRATIONS_DIR: extra,
      });
      expect(gone.code).toBe(1);
      expect(gone.stderr).toContain(
        'migration 001_orders.sql was applied to the embedded database but is not in migrations.dir',
      );
      const { default: postgres } = await import('postgres');
      const sql = postgres(other.url, { max: 1, onnotice: () => {} });
      try {
        expect((await sql`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'basalt'`)[0]!.n).toBe(0);
      } finally {
        await sql.end();
      }
    } finally {
      rmSync(extra, { recursive: true, force: true });
      await other.drop();
    }
  });

  test('a data dir held by a running instance is refused', async () => {
    const s = await startServer('embedded', { db: embedded, env });
    try {
      const other = await freshDb('external');
      try {
        const r = await runCli(['export-to', other.url], { BASALT_DATA_DIR: embedded.dataDir, ...env });
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(
          /^basalt export-to: the embedded database in .* is in use by basalt process \d+ .*; stop it first/,
        );
      } finally {
        await other.drop();
      }
    } finally {
      await s.running.stop();
    }
  });
});
