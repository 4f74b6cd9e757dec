/**
 * Start a real platform (real database, real listeners on free ports) for a test, and
 * talk to it over HTTP.
 */
import { openPlatform, type Platform } from '../../src/platform';
import { listen, type Running } from '../../src/serve';
import { areas, type ExtraModules } from '../../src/app';
import { freshDb, type Engine, type FreshDb } from './engines';

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface TestServer {
  engine: Engine;
  db: FreshDb;
  platform: Platform;
  running: Running;
  /** Base URL of the main listener, e.g. http://127.0.0.1:40123 */
  url: string;
  /** Base URL of the public listener (same as url when the split is off). */
  publicUrl: string;
  /** JSON request against the listener serving `path` per the route list (src/app.ts). */
  req<T = any>(
    method: string,
    path: string,
    opts?: {
      body?: unknown;
      headers?: Record<string, string>;
      raw?: BodyInit;
      base?: string;
      redirect?: RequestRedirect;
    },
  ): Promise<Reply<T>>;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Extra environment (settings as BASALT_* variables). */
  env?: Record<string, string>;
  /** Reuse an existing database (second instance on the same external database). */
  db?: FreshDb;
  extra?: ExtraModules;
}

/** The listener serving `path` per the route list (src/app.ts); the public one for paths both serve. */
const onMain = (path: string) => areas.of(path.replace(/[?#].*$/, '')).listener === 'main';

export async function startServer(engine: Engine, opts: StartOptions = {}): Promise<TestServer> {
  const db = opts.db ?? (await freshDb(engine));
  const env = { BASALT_WEB_PORT: '0', BASALT_WEB_PUBLIC_PORT: '0', BASALT_LOG_LEVEL: 'silent', ...db.env, ...opts.env };
  const platform = await openPlatform({ env, migrate: true, watch: true });
  let running: Running;
  try {
    running = await listen(platform, opts.extra);
  } catch (e) {
    await platform.shutdown();
    throw e;
  }
  const url = running.main.url.href.replace(/\/$/, '');
  const publicUrl = running.public ? running.public.url.href.replace(/\/$/, '') : url;
  const owned = !opts.db;
  return {
    engine,
    db,
    platform,
    running,
    url,
    publicUrl,
    async req(method, path, o = {}) {
      const base = o.base ?? (onMain(path) ? url : publicUrl);
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
    },
    async stop() {
      await running.stop();
      if (owned) await db.drop();
    },
  };
}
