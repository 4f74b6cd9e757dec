/**
 * Start a real platform (real database, real listeners on free ports) for a test, and
 * talk to it over HTTP: in this process, or — when BASALT_TEST_EXECUTABLE names a compiled
 * `basalt` — that executable in its own process (test/helpers/executable-server.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { openBasalt, type Basalt } from '../../src/services';
import { listen, type Running } from '../../src/serve';
import { areas, type ExtraModules } from '../../src/app';
import { freshDb, type Engine, type FreshDb } from './engines';
import { EXECUTABLE, startExecutable } from './executable-server';

/** Whether suites run on the source (false: against BASALT_TEST_EXECUTABLE): `test.if(ON_SOURCE)` for a test that reads the platform in process. */
export const ON_SOURCE = !EXECUTABLE;

/**
 * Whether `s.sql` reaches the database beside the server, as an operator's psql would: always on
 * the source; on the executable only on external PostgreSQL (the embedded engine lives inside it).
 */
export const canSql = (engine: Engine): boolean => ON_SOURCE || engine === 'external';

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface TestServer {
  engine: Engine;
  db: FreshDb;
  /** `source`: the platform in this process; `executable`: BASALT_TEST_EXECUTABLE in its own. */
  target: 'source' | 'executable';
  /** The platform in this process (source only: on the executable, reading it throws). */
  platform: Basalt;
  /** Its listeners (source only). */
  running: Running;
  /** Live settings changed as an operator does: in process, or through the executable's admin API. */
  settings: {
    set(key: string, value: unknown): Promise<void>;
    unset(key: string): Promise<void>;
  };
  /** An extension's live setting (`null`: back to its default), the same way. */
  setExtensionSetting(extension: string, key: string, value: unknown): Promise<void>;
  /** A call to the admin API as a signed-in administrator (executable only; the source has `platform`). */
  admin<T = any>(method: string, path: string, body?: unknown): Promise<Reply<T>>;
  /** SQL beside the server (DDL, rows written or read as psql would): only where `canSql(engine)`. */
  sql<T = any>(text: string, params?: unknown[]): Promise<T[]>;
  /** The id of the process serving: this one on the source, the executable's own otherwise. */
  pid: number;
  /** What the executable printed so far, start-up lines included (executable only). */
  output(): string;
  /** Base URL of the main listener, e.g. http://127.0.0.1:40123 */
  url: string;
  /** Base URL of the public listener (same as url when the split is off). */
  publicUrl: string;
  /** JSON request against the listener serving `path` per the route list (src/app.ts). */
  req<T = any>(method: string, path: string, opts?: RequestOptions): Promise<Reply<T>>;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Extra environment (settings as BASALT_* variables). */
  env?: Record<string, string>;
  /** Reuse an existing database (second instance on the same external database). */
  db?: FreshDb;
  extra?: ExtraModules;
  /** SQL files (name → text) for migrations.dir, applied at start: tables a suite needs, on either target. */
  migrations?: Record<string, string>;
}

/** The listener serving `path` per the route list (src/app.ts); the public one for paths both serve. */
const onMain = (path: string) => areas.of(path.replace(/[?#].*$/, '')).listener === 'main';

async function send(base: string, method: string, path: string, o: RequestOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  let body: BodyInit | undefined = o.raw;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body, redirect: o.redirect });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, body: parsed as any, text };
}

type RequestOptions = {
  body?: unknown;
  headers?: Record<string, string>;
  raw?: BodyInit;
  base?: string;
  redirect?: RequestRedirect;
};

const sourceOnly = (what: string): never => {
  throw new Error(
    `${what} is the in-process platform: this suite runs on the source only (scripts/test.ts lists the suites run against the executable)`,
  );
};

export async function startServer(engine: Engine, opts: StartOptions = {}): Promise<TestServer> {
  const db = opts.db ?? (await freshDb(engine));
  const owned = !opts.db;
  const env: Record<string, string> = { ...db.env, ...opts.env };
  if (opts.migrations) {
    const dir = join(db.dataDir, 'test-migrations');
    mkdirSync(dir, { recursive: true });
    for (const [name, sql] of Object.entries(opts.migrations)) writeFileSync(join(dir, name), sql);
    env.BASALT_MIGRATIONS_DIR = dir;
  }
  if (EXECUTABLE) {
    if (opts.extra) throw new Error('extra modules are in-process only: this suite runs on the source only');
    const exe = await startExecutable({ BASALT_LOG_LEVEL: 'warn', ...env }, db.dataDir).catch(async (e) => {
      if (owned) await db.drop();
      throw e;
    });
    const base = (path: string) => (onMain(path) ? exe.url : exe.publicUrl);
    const admin = async (method: string, path: string, body?: unknown) => {
      const r = await send(exe.url, method, path, { body, headers: await exe.adminHeaders() });
      if (r.status >= 300) throw new Error(`${method} ${path} as the administrator: ${r.status} ${r.text}`);
      return r;
    };
    return {
      engine,
      db,
      target: 'executable',
      get platform(): Basalt {
        return sourceOnly('s.platform');
      },
      get running(): Running {
        return sourceOnly('s.running');
      },
      pid: exe.pid,
      output: exe.output,
      url: exe.url,
      publicUrl: exe.publicUrl,
      settings: {
        set: async (key, value) => void (await admin('PUT', `/api/admin/settings/${key}`, { value })),
        unset: async (key) => void (await admin('DELETE', `/api/admin/settings/${key}`)),
      },
      setExtensionSetting: async (extension, key, value) =>
        void (await admin('PUT', `/api/admin/extensions/${extension}/settings/${key}`, { value })),
      admin,
      async sql(text, params = []) {
        if (!db.url)
          throw new Error('s.sql on the executable needs external PostgreSQL: guard the test with canSql(engine)');
        const c = postgres(db.url, { max: 1, onnotice: () => {} });
        try {
          return [...(await c.unsafe(text, params as postgres.ParameterOrJSON<never>[]))] as any[];
        } finally {
          await c.end();
        }
      },
      req: (method, path, o = {}) => send(o.base ?? base(path), method, path, o),
      async stop() {
        try {
          await exe.stop();
        } finally {
          if (owned) await db.drop();
        }
      },
    };
  }
  const platform = await openBasalt({
    env: { BASALT_WEB_PORT: '0', BASALT_WEB_PUBLIC_PORT: '0', BASALT_LOG_LEVEL: 'silent', ...env },
    migrate: true,
    watch: true,
  });
  let running: Running;
  try {
    running = await listen(platform, opts.extra);
  } catch (e) {
    await platform.shutdown();
    throw e;
  }
  const url = running.main.url.href.replace(/\/$/, '');
  const publicUrl = running.public ? running.public.url.href.replace(/\/$/, '') : url;
  return {
    engine,
    db,
    target: 'source',
    platform,
    running,
    pid: process.pid,
    output: () => sourceOnly('s.output()'),
    url,
    publicUrl,
    settings: {
      set: async (key, value) => void (await platform.settings.set(key, value)),
      unset: (key) => platform.settings.unset(key),
    },
    async setExtensionSetting(extension, key, value) {
      const settings = platform.services.extensions.settings(extension);
      if (!settings) throw new Error(`no extension ${extension} is loaded`);
      if (value === null) await settings.unset(key);
      else await settings.set(key, value);
    },
    admin: () => sourceOnly('s.admin'),
    sql: async (text, params = []) => (await platform.db.query(text, params)).rows as any[],
    req: (method, path, o = {}) => send(o.base ?? (onMain(path) ? url : publicUrl), method, path, o),
    async stop() {
      await running.stop();
      if (owned) await db.drop();
    },
  };
}
