/**
 * Test databases: every suite runs on the embedded engine, and also on external
 * PostgreSQL when BASALT_TEST_DATABASE_URL names a server (CI always does). Each
 * call gets a fresh, empty database.
 */
import { cpSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';

export type Engine = 'embedded' | 'external';

export const ADMIN_URL = process.env.BASALT_TEST_DATABASE_URL ?? '';
/** BASALT_TEST_EXTERNAL_ONLY: the external engine alone (scripts/test-pg-versions.ts, other PostgreSQL majors). */
export const ENGINES: Engine[] = !ADMIN_URL
  ? ['embedded']
  : process.env.BASALT_TEST_EXTERNAL_ONLY
    ? ['external']
    : ['embedded', 'external'];

export interface FreshDb {
  engine: Engine;
  /** Environment that points a platform at this database. */
  env: Record<string, string>;
  dataDir: string;
  /** External only: the database URL. */
  url: string;
  drop(): Promise<void>;
}

let template: Promise<string> | undefined;

/**
 * An initialized embedded data dir (initdb takes seconds), copied for every test: made once
 * per process, or given by BASALT_TEST_EMBEDDED_TEMPLATE (scripts/test.ts makes
 * one for all its `bun test` processes).
 */
export function embeddedTemplate(): Promise<string> {
  const given = process.env.BASALT_TEST_EMBEDDED_TEMPLATE;
  if (given) return Promise.resolve(given);
  return (template ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basalt-template-'));
    const { openEmbedded } = await import('../../src/db/embedded');
    const db = await openEmbedded(join(dir, 'pg'));
    await db.close();
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    return dir;
  })());
}

export async function freshDb(engine: Engine): Promise<FreshDb> {
  const dataDir = mkdtempSync(join(tmpdir(), 'basalt-test-'));
  if (engine === 'embedded') {
    cpSync(join(await embeddedTemplate(), 'pg'), join(dataDir, 'pg'), { recursive: true });
    return {
      engine,
      env: { BASALT_DATA_DIR: dataDir },
      dataDir,
      url: '',
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const name = `basalt_test_${crypto.randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(ADMIN_URL);
  u.pathname = '/' + name;
  const url = u.toString();
  return {
    engine,
    env: { BASALT_DATA_DIR: dataDir, BASALT_DATABASE_URL: url },
    dataDir,
    url,
    drop: async () => {
      const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
      await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      // The authenticator Basalt made for it (roles are cluster-wide: src/modules/database/authenticator.ts).
      await a.unsafe(`DROP ROLE IF EXISTS basalt_auth_${name}`).catch(() => {});
      await a.end();
      if (existsSync(dataDir)) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
