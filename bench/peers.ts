/**
 * How Basalt compares with a server a user would pick instead, in the same run: Parse Server,
 * Directus and Strapi from npm, each on its own fresh database of the same external PostgreSQL, read
 * the same 10 rows (group i % 1000 of the same 10,000-row table, by an indexed filter) through
 * their own REST API with a key that may read that table, under the same wrk settings as
 * `npm run bench:http` (1/16/64/256 connections, BENCH_SECONDS per cell, loopback only).
 *
 *  - Basalt: the compiled executable, POST /api/v1/db/query (the select cell of bench:http),
 *    a service key limited to the table;
 *  - Parse Server (Node, Express, pg-promise): GET /parse/classes/BenchItem?where={"grp":N}&limit=10,
 *    with the application id and REST API key; rows loaded through its batch API;
 *  - Directus (Node, Express, Knex): GET /items/bench_items?filter[grp][_eq]=N&limit=10, with the
 *    static token of a user whose policy may read the table; the table is made by the same SQL as
 *    Basalt's (Directus serves existing tables), where Parse's is its own (double precision numbers);
 *  - Strapi 5 (Node, Koa, Knex): GET /api/bench-items?filters[grp][$eq]=N&fields=grp,name,price&
 *    pagination[pageSize]=10&pagination[withCount]=false, with a read-only API token; a minimal
 *    project (one collection type, no admin panel served) written by this script, its 10,000 rows
 *    inserted through Strapi's own Knex connection into its own table, with an index on grp.
 * Every server gets the same pool size (Basalt's database.pool_max) and logs warnings only; the
 * peers run with NODE_ENV=production, otherwise on their defaults, except Directus's pressure
 * limiter (off: it answers 503 when its event loop lags). No response cache anywhere (Directus's
 * is off by default and stays off). Each is one process: its CPU seconds per 1,000 requests
 * (/proc/<pid>/stat) and its RSS are its own. The cells alternate server by server so each sees
 * the same background load.
 *
 * The peers are installed with npm outside the checkout, into BENCH_PEERS_DIR/<peer> (default
 * <tmpdir>/basalt-bench-peers; reused by later runs), each install bounded by BENCH_INSTALL_SECONDS;
 * a peer that does not install or start in time is skipped with the reason. Every server runs on
 * core 0 and wrk on core 1 (bench/support.ts, PIN). Every process and database the run started is
 * removed at the end.
 *
 *   npm run bench:peers
 *   BENCH_SECONDS=5 BENCH_PEERS=parse,strapi BENCH_CONNECTIONS=16,64 npm run bench:peers
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import postgres from 'postgres';
import {
  benchKey,
  BENCH_ITEMS_SQL,
  LUA_SHOW,
  benchItem,
  buildExecutable,
  externalDb,
  fmt,
  freePort,
  printTable,
  requireWrk,
  selectLua,
  waitFor,
  wrk,
  type Cell,
  benchSelect,
  PIN,
} from './support';
import type { FreshDb } from '../test/helpers/engines';
import { openBasalt } from '../src/services';

const ROOT = resolve(import.meta.dir, '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = (process.env.BENCH_CONNECTIONS ?? '1,16,64,256').split(',').map(Number);
const PEERS = (process.env.BENCH_PEERS ?? 'parse,directus,strapi').split(',').filter(Boolean);
const INSTALL_SECONDS = Number(process.env.BENCH_INSTALL_SECONDS ?? 420);
const WARMUP_SECONDS = 3;
// Outside the checkout: the peers' node_modules never meet the project's tools.
const INSTALL_DIR = process.env.BENCH_PEERS_DIR ?? join(tmpdir(), 'basalt-bench-peers');
// Pinned so a later run measures the same code; BENCH_PARSE_VERSION / BENCH_DIRECTUS_VERSION /
// BENCH_STRAPI_VERSION to change.
const PARSE_VERSION = process.env.BENCH_PARSE_VERSION ?? '9.10.0';
const DIRECTUS_VERSION = process.env.BENCH_DIRECTUS_VERSION ?? '12.4.0';
// 5.54.0: the registry's @strapi/admin stops there (@strapi/strapi@5.55.1 names an @strapi/admin@5.55.1 it does not have).
const STRAPI_VERSION = process.env.BENCH_STRAPI_VERSION ?? '5.54.0';
const JWT_SECRET = 'bench-secret-' + 'x'.repeat(40);

interface Server {
  name: string;
  /** What ran: version and runtime. */
  runs: string;
  url: string;
  proc: Subprocess;
  /** The wrk script of its 10-row read. */
  lua: string;
}

// ---- what the run started, removed at the end (and on Ctrl-C) ----

const procs: Subprocess[] = [];
const dbs: FreshDb[] = [];
const dirs: string[] = [];

async function stop(proc: Subprocess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill('SIGTERM');
  const done = await Promise.race([proc.exited.then(() => true), Bun.sleep(10_000).then(() => false)]);
  if (!done) {
    proc.kill('SIGKILL');
    await proc.exited;
  }
}

let cleaned: Promise<void> | undefined;
function cleanup(): Promise<void> {
  return (cleaned ??= (async () => {
    await Promise.all(procs.map(stop));
    for (const db of dbs) await db.drop().catch((e) => console.error(`dropping ${db.url}: ${(e as Error).message}`));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  })());
}
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => void cleanup().then(() => process.exit(130)));

function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/** A long-running server process; its stderr goes to `<cwd>/stderr.log` (a pipe nobody reads would fill and block it). */
function spawn(cmd: string[], opts: { cwd: string; env: Record<string, string> }): Subprocess {
  const proc = Bun.spawn([...PIN.server, ...cmd], {
    cwd: opts.cwd,
    env: opts.env,
    stdout: 'ignore',
    stderr: Bun.file(join(opts.cwd, 'stderr.log')),
  });
  procs.push(proc);
  return proc;
}

/** The last lines a server wrote to stderr, for the reason it is skipped. */
function stderrOf(dir: string): string {
  const path = join(dir, 'stderr.log');
  return existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').slice(-8).join('\n') : '';
}

/** Run a command to its end within `seconds`; its exit code and the tail of its output. */
async function run(
  cmd: string[],
  opts: { cwd: string; env: Record<string, string>; seconds: number },
): Promise<{ code: number; tail: string }> {
  const proc = Bun.spawn(['timeout', '--kill-after=10', String(opts.seconds), ...cmd], {
    cwd: opts.cwd,
    env: opts.env,
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, tail: (out + err).trim().split('\n').slice(-8).join('\n') };
}

// ---- installing the peers ----

const nodeEnv = (home: string, extra: Record<string, string> = {}): Record<string, string> => ({
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: home,
  NODE_ENV: 'production',
  ...extra,
});

/**
 * `pkg@version` (and `extra` packages, `name@version`) installed under BENCH_PEERS_DIR/<name>,
 * or undefined (the reason printed).
 */
async function install(name: string, pkg: string, version: string, extra: string[] = []): Promise<string | undefined> {
  const dir = join(INSTALL_DIR, name);
  const specs = [`${pkg}@${version}`, ...extra];
  const installed = (spec: string) => {
    const at = spec.lastIndexOf('@');
    const manifest = join(dir, 'node_modules', spec.slice(0, at), 'package.json');
    return existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).version === spec.slice(at + 1);
  };
  if (specs.every(installed)) return dir;
  mkdirSync(dir, { recursive: true });
  if (!existsSync(join(dir, 'package.json'))) writeFileSync(join(dir, 'package.json'), '{ "private": true }\n');
  console.error(`installing ${specs.join(' ')} into ${dir} (at most ${INSTALL_SECONDS} s)`);
  const t0 = performance.now();
  const r = await run(
    ['npm', 'install', '--no-audit', '--no-fund', '--loglevel=error', '--save-exact', '--prefix', dir, ...specs],
    {
      cwd: dir,
      env: process.env as Record<string, string>, // npm's own configuration: registry, proxy, CA certificates
      seconds: INSTALL_SECONDS,
    },
  );
  const took = ((performance.now() - t0) / 1000).toFixed(0);
  if (r.code !== 0 || !specs.every(installed)) {
    console.error(
      `skipping ${pkg}: npm install ${r.code === 124 ? `did not finish in ${INSTALL_SECONDS} s` : `failed (${r.code}) after ${took} s`}\n${r.tail}`,
    );
    return undefined;
  }
  console.error(`installed ${pkg}@${version} in ${took} s`);
  return dir;
}

async function json(
  url: string,
  init: { method?: string; headers: Record<string, string>; body?: unknown },
): Promise<any> {
  const r = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { 'Content-Type': 'application/json', ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${init.method ?? 'GET'} ${url}: ${r.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}

// ---- the servers ----

async function startBasalt(exe: string): Promise<Server & { poolMax: number }> {
  const db = (await externalDb()) as FreshDb;
  dbs.push(db);
  const env = { ...db.env, BASALT_AUTH_JWT_SECRET: JWT_SECRET, BASALT_LOG_LEVEL: 'warn' };
  const p = await openBasalt({ env, migrate: true });
  let key: string, poolMax: number;
  try {
    await p.db.exec(BENCH_ITEMS_SQL);
    key = await benchKey(p, ['db:query'], ['bench_items']);
    poolMax = p.settings.get('database.pool_max');
  } finally {
    await p.shutdown();
  }
  const port = await freePort();
  const proc = spawn([exe, 'serve'], {
    cwd: db.dataDir,
    env: { PATH: '/usr/bin:/bin', HOME: db.dataDir, ...env, BASALT_WEB_PORT: String(port) },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(url + '/readyz', proc, 'basalt').catch((e: Error) => {
    throw new Error(`${e.message}\n${stderrOf(db.dataDir)}`);
  });
  const r = await json(url + '/api/v1/db/query', {
    method: 'POST',
    headers: { 'X-API-Key': key },
    body: benchSelect(5),
  });
  if (r.data.rows.length !== 10) throw new Error(`Basalt answered ${r.data.rows.length} rows, not 10`);
  const dir = scratchDir('basalt-peers-lua-');
  writeFileSync(join(dir, 'basalt.lua'), selectLua(key));
  return { name: 'Basalt', runs: `compiled, Bun ${Bun.version}`, url, proc, lua: join(dir, 'basalt.lua'), poolMax };
}

async function startParse(installDir: string, poolMax: number): Promise<Server> {
  const db = (await externalDb()) as FreshDb;
  dbs.push(db);
  const dir = scratchDir('basalt-peers-parse-');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const appId = 'bench';
  const masterKey = 'bench-master-' + crypto.randomUUID();
  const restKey = 'bench-rest-' + crypto.randomUUID();
  const dbUrl = new URL(db.url);
  dbUrl.searchParams.set('max', String(poolMax));
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({
      appId,
      masterKey,
      restAPIKey: restKey,
      databaseURI: dbUrl.toString(),
      port,
      host: '127.0.0.1',
      mountPath: '/parse',
      serverURL: `${url}/parse`,
      logLevel: 'warn',
      logsFolder: join(dir, 'logs'),
    }),
  );
  const proc = spawn(
    ['node', join(installDir, 'node_modules/parse-server/bin/parse-server'), join(dir, 'config.json')],
    { cwd: dir, env: nodeEnv(dir) },
  );
  try {
    await waitFor(url + '/parse/health', proc, 'Parse Server', 120_000);
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${stderrOf(dir)}`);
  }
  const master = { 'X-Parse-Application-Id': appId, 'X-Parse-Master-Key': masterKey };
  await json(url + '/parse/schemas/BenchItem', {
    method: 'POST',
    headers: master,
    body: {
      className: 'BenchItem',
      fields: { grp: { type: 'Number' }, name: { type: 'String' }, price: { type: 'Number' } },
      indexes: { grp_1: { grp: 1 } },
    },
  });
  // The same 10,000 rows, written by Parse itself (its columns, its ACL fields) through the batch API.
  for (let from = 1; from <= 10_000; from += 500) {
    const requests = Array.from({ length: 500 }, (_, i) => ({
      method: 'POST',
      path: '/parse/classes/BenchItem',
      body: benchItem(from + i),
    }));
    await json(url + '/parse/batch', { method: 'POST', headers: master, body: { requests } });
  }
  const sql = postgres(db.url, { max: 1, onnotice: () => {} });
  await sql.unsafe('ANALYZE "BenchItem"');
  await sql.end();
  const rest = { 'X-Parse-Application-Id': appId, 'X-Parse-REST-API-Key': restKey };
  const r = await json(
    `${url}/parse/classes/BenchItem?limit=10&keys=grp,name,price&where=${encodeURIComponent('{"grp":5}')}`,
    { headers: rest },
  );
  if (r.results.length !== 10) throw new Error(`Parse Server answered ${r.results.length} rows, not 10`);
  writeFileSync(
    join(dir, 'parse.lua'),
    `wrk.headers["X-Parse-Application-Id"] = "${appId}"
wrk.headers["X-Parse-REST-API-Key"] = "${restKey}"
${LUA_SHOW}local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", "/parse/classes/BenchItem?limit=10&keys=grp,name,price&where=%7B%22grp%22%3A" .. (i % 1000) .. "%7D")
end
response = function(status, headers, body) show(status, body) end
`,
  );
  return {
    name: 'Parse Server',
    runs: `${PARSE_VERSION}, Node ${nodeVersion}`,
    url,
    proc,
    lua: join(dir, 'parse.lua'),
  };
}

async function startDirectus(installDir: string, poolMax: number): Promise<Server> {
  const db = (await externalDb()) as FreshDb;
  dbs.push(db);
  const sql = postgres(db.url, { max: 1, onnotice: () => {} });
  await sql.unsafe(BENCH_ITEMS_SQL);
  await sql.end();
  const dir = scratchDir('basalt-peers-directus-');
  mkdirSync(join(dir, 'uploads'));
  mkdirSync(join(dir, 'extensions'));
  writeFileSync(join(dir, 'package.json'), '{ "private": true }\n');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const adminToken = 'bench-admin-' + crypto.randomUUID();
  const env = nodeEnv(dir, {
    DB_CLIENT: 'pg',
    DB_CONNECTION_STRING: db.url,
    DB_POOL__MAX: String(poolMax),
    SECRET: crypto.randomUUID() + crypto.randomUUID(),
    ADMIN_EMAIL: 'admin@example.com',
    ADMIN_PASSWORD: 'bench-password-1',
    ADMIN_TOKEN: adminToken,
    HOST: '127.0.0.1',
    PORT: String(port),
    PUBLIC_URL: url,
    LOG_LEVEL: 'warn',
    TELEMETRY: 'false',
    CACHE_ENABLED: 'false',
    RATE_LIMITER_ENABLED: 'false',
    // On by default: answers 503 "Under pressure" when its event loop lags, which a loaded 2-core
    // machine reaches. Off, so every answer counted is a read (Basalt sheds no load either).
    PRESSURE_LIMITER_ENABLED: 'false',
    STORAGE_LOCAL_ROOT: join(dir, 'uploads'),
    EXTENSIONS_PATH: join(dir, 'extensions'),
  });
  const cli = join(installDir, 'node_modules/directus/cli.js');
  const boot = await run(['node', cli, 'bootstrap'], { cwd: dir, env, seconds: 180 });
  if (boot.code !== 0) throw new Error(`directus bootstrap failed (${boot.code})\n${boot.tail}`);
  const proc = spawn(['node', cli, 'start'], { cwd: dir, env });
  try {
    await waitFor(url + '/server/ping', proc, 'Directus', 120_000);
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${stderrOf(dir)}`);
  }
  // A reader: a user with a static token whose policy may read bench_items, all fields, no row filter.
  const admin = { Authorization: `Bearer ${adminToken}` };
  await json(url + '/collections', {
    method: 'POST',
    headers: admin,
    body: { collection: 'bench_items', meta: { hidden: false }, schema: null },
  }).catch(() => {});
  const policy = (
    await json(url + '/policies', {
      method: 'POST',
      headers: admin,
      body: { name: 'bench reader', admin_access: false, app_access: false },
    })
  ).data;
  await json(url + '/permissions', {
    method: 'POST',
    headers: admin,
    body: { policy: policy.id, collection: 'bench_items', action: 'read', fields: ['*'], permissions: {} },
  });
  const token = 'bench-reader-' + crypto.randomUUID();
  await json(url + '/users', {
    method: 'POST',
    headers: admin,
    body: { email: 'reader@example.com', password: 'bench-password-1', token, policies: [{ policy: policy.id }] },
  });
  const r = await json(`${url}/items/bench_items?fields=id,grp,name,price&limit=10&filter[grp][_eq]=5`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  if (r.data.length !== 10) throw new Error(`Directus answered ${r.data.length} rows, not 10`);
  writeFileSync(
    join(dir, 'directus.lua'),
    `wrk.headers["Authorization"] = "Bearer ${token}"
${LUA_SHOW}local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", "/items/bench_items?fields=id,grp,name,price&limit=10&filter%5Bgrp%5D%5B_eq%5D=" .. (i % 1000))
end
response = function(status, headers, body) show(status, body) end
`,
  );
  return {
    name: 'Directus',
    runs: `${DIRECTUS_VERSION}, Node ${nodeVersion}`,
    url,
    proc,
    lua: join(dir, 'directus.lua'),
  };
}

/** The files of a minimal Strapi 5 project: one collection type like bench_items, no admin panel served. */
const STRAPI_FILES: Record<string, string> = {
  'package.json': '{ "name": "strapi-bench", "private": true, "version": "0.0.0" }\n',
  'server.js': `const { createStrapi } = require('@strapi/strapi');
createStrapi({ appDir: __dirname, distDir: __dirname }).start();
`,
  'config/server.js': `module.exports = ({ env }) => ({ host: '127.0.0.1', port: env.int('PORT'), app: { keys: env.array('APP_KEYS') } });
`,
  'config/database.js': `module.exports = ({ env }) => ({
  connection: {
    client: 'postgres',
    connection: { connectionString: env('DATABASE_URL') },
    pool: { min: 0, max: env.int('DATABASE_POOL_MAX') },
  },
});
`,
  'config/admin.js': `module.exports = ({ env }) => ({
  auth: { secret: env('ADMIN_JWT_SECRET') },
  apiToken: { salt: env('API_TOKEN_SALT') },
  transfer: { token: { salt: env('TRANSFER_TOKEN_SALT') } },
  secrets: { encryptionKey: env('ENCRYPTION_KEY') },
  serveAdminPanel: false,
});
`,
  'config/middlewares.js': `module.exports = ['strapi::logger', 'strapi::errors', 'strapi::security', 'strapi::cors', 'strapi::poweredBy', 'strapi::query', 'strapi::body', 'strapi::session', 'strapi::favicon', 'strapi::public'];
`,
  'config/plugins.js': 'module.exports = {};\n',
  'config/logger.js': `const { winston } = require('@strapi/logger');
module.exports = { transports: [new winston.transports.Console({ level: 'warn' })] };
`,
  'src/api/bench-item/content-types/bench-item/schema.json': `${JSON.stringify({
    kind: 'collectionType',
    collectionName: 'bench_items',
    info: { singularName: 'bench-item', pluralName: 'bench-items', displayName: 'Bench item' },
    options: { draftAndPublish: false },
    attributes: {
      grp: { type: 'integer', required: true },
      name: { type: 'string', required: true },
      price: { type: 'decimal' },
    },
  })}\n`,
  'src/api/bench-item/controllers/bench-item.js':
    "module.exports = require('@strapi/strapi').factories.createCoreController('api::bench-item.bench-item');\n",
  'src/api/bench-item/routes/bench-item.js':
    "module.exports = require('@strapi/strapi').factories.createCoreRouter('api::bench-item.bench-item');\n",
  'src/api/bench-item/services/bench-item.js':
    "module.exports = require('@strapi/strapi').factories.createCoreService('api::bench-item.bench-item');\n",
  // At start: the same 10,000 rows through Strapi's own Knex connection into its own table (its
  // document ids and dates), an index on grp, and a read-only API token written to BENCH_TOKEN_FILE.
  'src/index.js': `const { writeFileSync } = require('node:fs');
module.exports = {
  register() {},
  async bootstrap({ strapi }) {
    const knex = strapi.db.connection;
    const now = new Date();
    for (let from = 1; from <= 10000; from += 1000) {
      const rows = [];
      for (let g = from; g < from + 1000; g++)
        rows.push({ document_id: 'bench' + String(g).padStart(19, '0'), grp: g % 1000, name: 'item ' + g, price: (g % 100) + 0.99, created_at: now, updated_at: now, published_at: now });
      await knex('bench_items').insert(rows);
    }
    await knex.raw('CREATE INDEX bench_items_grp ON bench_items (grp)');
    await knex.raw('ANALYZE bench_items');
    const token = await strapi.service('admin::api-token').create({ name: 'bench', description: '', type: 'read-only', lifespan: null });
    writeFileSync(process.env.BENCH_TOKEN_FILE, token.accessKey, { mode: 0o600 });
  },
};
`,
};

async function startStrapi(installDir: string, poolMax: number): Promise<Server> {
  const db = (await externalDb()) as FreshDb;
  dbs.push(db);
  const dir = scratchDir('basalt-peers-strapi-');
  for (const [path, text] of Object.entries(STRAPI_FILES)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  mkdirSync(join(dir, 'public', 'uploads'), { recursive: true });
  symlinkSync(join(installDir, 'node_modules'), join(dir, 'node_modules'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const secret = () => crypto.randomUUID();
  const tokenFile = join(dir, 'token');
  const env = nodeEnv(dir, {
    DATABASE_URL: db.url,
    DATABASE_POOL_MAX: String(poolMax),
    PORT: String(port),
    APP_KEYS: `${secret()},${secret()}`,
    ADMIN_JWT_SECRET: secret(),
    API_TOKEN_SALT: secret(),
    TRANSFER_TOKEN_SALT: secret(),
    ENCRYPTION_KEY: secret(),
    STRAPI_TELEMETRY_DISABLED: 'true',
    BENCH_TOKEN_FILE: tokenFile,
  });
  const proc = spawn(['node', 'server.js'], { cwd: dir, env });
  try {
    await waitFor(url + '/_health', proc, 'Strapi', 180_000);
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${stderrOf(dir)}`);
  }
  const token = readFileSync(tokenFile, 'utf8');
  const query = (grp: string) =>
    `/api/bench-items?filters%5Bgrp%5D%5B%24eq%5D=${grp}&fields%5B0%5D=grp&fields%5B1%5D=name&fields%5B2%5D=price&pagination%5BpageSize%5D=10&pagination%5BwithCount%5D=false`;
  const r = await json(url + query('5'), { headers: { Authorization: `Bearer ${token}` } });
  if (r.data.length !== 10) throw new Error(`Strapi answered ${r.data.length} rows, not 10`);
  writeFileSync(
    join(dir, 'strapi.lua'),
    `wrk.headers["Authorization"] = "Bearer ${token}"
${LUA_SHOW}local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", "${query('" .. (i % 1000) .. "')}")
end
response = function(status, headers, body) show(status, body) end
`,
  );
  return { name: 'Strapi', runs: `${STRAPI_VERSION}, Node ${nodeVersion}`, url, proc, lua: join(dir, 'strapi.lua') };
}

// ---- the run ----

const wrkBin = requireWrk('bench:peers');
const node = Bun.which('node');
const nodeVersion = node
  ? (await run(['node', '--version'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, seconds: 10 })).tail
  : '';
const skipped: string[] = [];
const servers: Server[] = [];
try {
  const exe = await buildExecutable(ROOT);
  if (!process.env.BENCH_EXE) dirs.push(dirname(exe));
  const basalt = await startBasalt(exe);
  servers.push(basalt);
  const peers: Record<
    string,
    { pkg: string; version: string; extra?: string[]; start: (dir: string, poolMax: number) => Promise<Server> }
  > = {
    // Parse Server requires router/lib/layer without declaring router, and reads Layer#params, which
    // router 2.3.0 (what express 5 resolves to today) no longer sets: every /parse/batch sub-request
    // fails with 500 "Cannot convert undefined or null to object". router 2.2.0 still sets it.
    parse: { pkg: 'parse-server', version: PARSE_VERSION, extra: ['router@2.2.0'], start: startParse },
    directus: { pkg: 'directus', version: DIRECTUS_VERSION, start: startDirectus },
    strapi: { pkg: '@strapi/strapi', version: STRAPI_VERSION, extra: ['pg@8.23.1'], start: startStrapi },
  };
  for (const name of PEERS) {
    const peer = peers[name];
    if (!peer) throw new Error(`unknown peer ${name} (parse, directus, strapi)`);
    if (!node) {
      skipped.push(`${peer.pkg}: no node on PATH`);
      continue;
    }
    const dir = await install(name, peer.pkg, peer.version, peer.extra);
    if (!dir) {
      skipped.push(`${peer.pkg}@${peer.version}: did not install (see above)`);
      continue;
    }
    const t0 = performance.now();
    try {
      servers.push(await peer.start(dir, basalt.poolMax));
      console.error(
        `${peer.pkg}@${peer.version} ready (data loaded) in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
      );
    } catch (e) {
      console.error(`skipping ${peer.pkg}: ${(e as Error).message}`);
      skipped.push(`${peer.pkg}@${peer.version}: did not start (${(e as Error).message.split('\n')[0]})`);
    }
  }

  // Warm-up, figures thrown away: connections, prepared statements, and the JIT of the Node peers.
  const load0 = loadavg()[0]!;
  for (const s of servers) await wrk(wrkBin, s.url, s.lua, 16, 2, s.proc.pid, WARMUP_SECONDS);
  const rows: string[][] = [['conns', 'server', 'req/s', 'p50 / p99 ms', 'vs Basalt', 'CPU s / 1k req', 'RSS MiB']];
  for (const c of CONNECTIONS) {
    const cells: Cell[] = [];
    for (const s of servers) cells.push(await wrk(wrkBin, s.url, s.lua, c, Math.min(c, 2), s.proc.pid, SECONDS));
    servers.forEach((s, i) => {
      const x = cells[i]!;
      const errs = x.errors ? ` (errors: ${x.errors})` : '';
      rows.push([
        String(c),
        s.name + errs,
        fmt(x.rps),
        `${x.p50.toFixed(1)} / ${x.p99.toFixed(1)}`,
        (x.rps / cells[0]!.rps).toFixed(2),
        x.cpuPer1000.toFixed(3),
        String(Math.round(x.rss)),
      ]);
      console.error(rows.at(-1)!.join(' | '));
    });
  }
  const versions = servers.map((s) => `${s.name} (${s.runs})`).join(', ');
  printTable(
    rows,
    `\nSelect 10 rows by an indexed filter, wrk ${SECONDS} s per cell, same PostgreSQL, pool ${basalt.poolMax} each: ${versions}\n`,
  );
  console.log(
    `\n${cpus().length} × ${cpus()[0]?.model.trim()}, ${new Date().toISOString().slice(0, 10)}; 1-minute load average ${load0.toFixed(1)} before the cells, ${loadavg()[0]!.toFixed(1)} after`,
  );
  if (skipped.length) console.log('skipped: ' + skipped.join('; '));
} finally {
  await cleanup();
}
