import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { query } from './fixtures';
import { expectA } from '../helpers/envelopes';

describe.each(ENGINES)('tables from operator migrations on %s', (engine) => {
  let s: TestServer;
  const dir = mkdtempSync(join(tmpdir(), 'basalt-migrations-'));

  beforeAll(async () => {
    writeFileSync(
      join(dir, '001_products.sql'),
      'CREATE TABLE products (sku text PRIMARY KEY, title text NOT NULL, stock int4 NOT NULL DEFAULT 0);',
    );
    writeFileSync(
      join(dir, '002_seed.sql'),
      "INSERT INTO products (sku, title, stock) VALUES ('A-1', 'Anvil', 3), ('B-2', 'Bucket', 0);",
    );
    s = await startServer(engine, { env: { BASALT_MIGRATIONS_DIR: dir } });
  });
  afterAll(async () => {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('are reachable through the API as soon as the platform is up', async () => {
    const key = await createKey(s, {
      type: 'service',
      service: 'shop',
      permissions: ['db:query'],
      tables: ['products'],
    });
    const r = await query(s, key, {
      entity: 'products',
      action: 'select',
      filters: [{ field: 'stock', op: 'gt', value: 0 }],
    });
    expectA(r, 200, { rows: [{ sku: 'A-1', title: 'Anvil', stock: 3 }], count: 1 });
    const migrations = await query(s, key, { entity: 'schema_migrations', action: 'select' });
    expect(migrations.status).toBe(403);
  });
});
