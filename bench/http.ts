/**
 * HTTP throughput as a user sees it: load from wrk (a separate process) against the
 * compiled executable, next to a bare baseline server started as its own process
 * (bench/baselines/bare.ts), both measured in the same run, cell by cell, alternating.
 *
 * Workloads (each against Basalt and its baseline):
 *  - select 10 rows by an indexed filter (POST /api/v1/db/query) vs Bun.serve + the same
 *    driver, pool size and SQL text;
 *  - transaction round: begin, 3 inserts, commit (5 requests) vs the same statements on a
 *    reserved connection behind the same paths (one wrk thread per connection, so each
 *    connection walks its own round);
 *  - user select: a signed-in user selects 10 of their rows by an indexed filter from a
 *    100,000-row table under the policy owner_id = basalt.uid() vs the same rows selected
 *    with a service key (owner as a filter, no policy) from the same server: the cost of
 *    running as a user (docs/database.md, Users' own data; target ≥ 0.7);
 *  - GET /api/v1/auth/me vs the same JWT checked by the same verifier (fast-jwt), no database;
 *  - keyed mail acceptance (POST /api/v1/mail/send, a fresh Idempotency-Key per request) vs
 *    the same mail-job insert. The SMTP server of the run accepts connections and never
 *    answers, so the queue worker waits instead of competing for the CPU.
 * Each cell is BENCH_REPEATS (default 3) baseline/Basalt pairs, alternating which runs first.
 * Reported per cell, from the pair with the median ratio: req/s, p50, p99 (wrk's latency
 * distribution), the ratio to the baseline (and the lowest–highest ratio of the pairs), the
 * server's CPU seconds per 1,000 requests (/proc/<pid>/stat) and its RSS.
 * Loopback only; every wrk run is bounded by BENCH_SECONDS.
 *
 *   npm run bench:http                                     # both engines, 1/16/64/256 connections
 *   BENCH_ENGINES=external BENCH_WORKLOADS=select BENCH_CONNECTIONS=64 npm run bench:http
 */
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import {
  benchKey,
  benchToken,
  BENCH_ITEMS_SQL,
  benchOwnedSql,
  ownedSelectLua,
  LUA_SHOW,
  mailLua,
  withNonce,
  benchDb,
  buildExecutable,
  fmt,
  freePort,
  printTable,
  requireWrk,
  selectLua,
  benchSelect,
  waitFor,
  wrk,
  wrkShort,
  type Cell,
} from './support';
import { openPlatform } from '../src/platform';
import { buildStatement } from '../src/modules/database/query-builder';

const ROOT = resolve(import.meta.dir, '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
// Each cell is measured as this many baseline/Basalt pairs, alternating which goes first; the
// table gives the medians and the spread of the pairs' ratios (one pair moves by ±0.1 on a
// 2-core machine where wrk, PostgreSQL and the server share the cores).
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const CONNECTIONS = (process.env.BENCH_CONNECTIONS ?? '1,16,64,256').split(',').map(Number);
const ENGINES = (process.env.BENCH_ENGINES ?? 'external,embedded').split(',') as ('external' | 'embedded')[];
// Transaction rounds last: wrk stops mid-round, and the transaction it leaves open holds the
// embedded engine until the idle timeout (1 s in this run) rolls it back.
const WORKLOADS = (process.env.BENCH_WORKLOADS ?? 'select,user-select,me,mail,tx').split(',');
const JWT_SECRET = 'bench-secret-' + 'x'.repeat(40);

/** A TCP server that accepts and never answers: the mail worker's sends wait on it. */
function silentSmtp() {
  return Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
}

/** The wrk scripts of one engine's run: the key and token are written in. */
function scripts(dir: string, key: string, token: string, uid: string): Record<string, string> {
  const json = `wrk.headers["Content-Type"] = "application/json"\nwrk.headers["X-API-Key"] = "${key}"\n`;
  const show = LUA_SHOW;
  const files: Record<string, string> = {
    select: selectLua(key),
    'user-select': ownedSelectLua({ token }),
    'owned-select': ownedSelectLua({ key, uid }),
    tx: `${json}${show}local step, id = 0, ""
request = function()
  if step == 0 then return wrk.format("POST", "/api/v1/db/transaction/begin", nil, "{}") end
  if step <= 3 then return wrk.format("POST", "/api/v1/db/query", nil, '{"entity":"bench_log","action":"insert","data":{"n":1,"note":"http"},"transaction_id":"' .. id .. '"}') end
  return wrk.format("POST", "/api/v1/db/transaction/" .. id .. "/commit", nil, "{}")
end
response = function(status, headers, body)
  show(status, body)
  if step == 0 then id = string.match(body, '"transaction_id":"([^"]+)"') or "" end
  step = (step + 1) % 5
end
`,
    me: `${show}wrk.method = "GET"
wrk.path = "/api/v1/auth/me"
wrk.headers["Authorization"] = "Bearer ${token}"
response = function(status, headers, body) show(status, body) end
`,
    mail: mailLua(key),
  };
  const paths: Record<string, string> = {};
  for (const [name, text] of Object.entries(files)) {
    paths[name] = join(dir, `${name}.lua`);
    writeFileSync(paths[name]!, text);
  }
  return paths;
}

const LABEL: Record<string, string> = {
  select: 'select 10 rows (indexed filter)',
  'user-select': 'user select 10 own rows of 100k (baseline: service key, same server)',
  tx: 'transaction round (rounds/s)',
  me: 'GET /api/v1/auth/me',
  mail: 'keyed mail acceptance',
};

const rows: string[][] = [
  [
    'engine',
    'workload',
    'conns',
    'baseline req/s',
    'p50/p99 ms',
    'Basalt req/s',
    'p50/p99 ms',
    'ratio',
    'pairs',
    'CPU s/1k (base/Basalt)',
    'RSS MiB (base/Basalt)',
  ],
];

const wrkBin = requireWrk('bench:http');
const exe = await buildExecutable(ROOT);

for (const engine of ENGINES) {
  const db = await benchDb(engine);
  if (!db) continue;
  const smtp = silentSmtp();
  const env = {
    ...db.env,
    BASALT_AUTH_JWT_SECRET: JWT_SECRET,
    BASALT_LOG_LEVEL: 'warn',
    BASALT_MAIL_SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
    BASALT_MAIL_FROM: 'bench@example.com',
    BASALT_DB_MAX_TRANSACTIONS_PER_KEY: '1000',
    BASALT_DB_TRANSACTION_IDLE_TIMEOUT_MS: '1000',
  };
  const procs: Subprocess[] = [];
  try {
    // Schema, a key, a signed-in user and the statement Basalt builds, prepared in process; then closed.
    const p = await openPlatform({ env, migrate: true });
    let key: string, token: string, uid: string, selectSql: string, poolMax: number;
    try {
      await p.db.exec(
        BENCH_ITEMS_SQL + 'CREATE TABLE public.bench_log (id serial PRIMARY KEY, n int4 NOT NULL, note text);',
      );
      key = await benchKey(p, ['db:query', 'mail:send'], ['bench_items', 'bench_log', 'bench_owned']);
      token = await benchToken(p);
      uid = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).sub;
      await p.db.exec(benchOwnedSql(uid));
      const snap = await p.services.database.catalog.refresh();
      selectSql = buildStatement(benchSelect(0) as never, snap.tables.get('bench_items')!, { maxLimit: 1000 }).sql;
      poolMax = p.settings.get<number>('database.pool_max');
    } finally {
      await p.shutdown();
    }
    // The embedded baseline opens its own copy of the data (the original belongs to Basalt).
    const baseDir = mkdtempSync(join(tmpdir(), 'basalt-bench-base-'));
    if (engine === 'embedded') cpSync(join(db.dataDir, 'pg'), join(baseDir, 'pg'), { recursive: true });

    const port = await freePort();
    const basalt = Bun.spawn([exe, 'serve'], {
      env: { PATH: '/usr/bin:/bin', HOME: db.dataDir, ...env, BASALT_WEB_PORT: String(port) },
      cwd: db.dataDir,
      stdout: 'ignore',
      stderr: 'inherit',
    });
    procs.push(basalt);
    const basePort = await freePort();
    const base = Bun.spawn([process.execPath, join(import.meta.dir, 'baselines/bare.ts')], {
      env: {
        ...process.env,
        BENCH_PORT: String(basePort),
        BENCH_POOL_MAX: String(poolMax),
        BENCH_SELECT_SQL: selectSql,
        BENCH_JWT_SECRET: JWT_SECRET,
        ...(engine === 'external' ? { BENCH_DB_URL: db.url } : { BENCH_PG_DIR: join(baseDir, 'pg') }),
      },
      stdout: 'ignore',
      stderr: 'inherit',
    });
    procs.push(base);
    const basaltUrl = `http://127.0.0.1:${port}`;
    const baseUrl = `http://127.0.0.1:${basePort}`;
    await waitFor(basaltUrl + '/readyz', basalt, 'basalt');
    await waitFor(baseUrl + '/', base, 'the baseline');

    const lua = scripts(mkdtempSync(join(tmpdir(), 'basalt-bench-lua-')), key, token, uid);
    for (const w of WORKLOADS) {
      // The user select's yardstick is Basalt itself with a service key, not the bare server.
      const yard =
        w === 'user-select'
          ? { url: basaltUrl, pid: basalt.pid!, script: lua['owned-select']! }
          : { url: baseUrl, pid: base.pid!, script: '' };
      // One transaction holds the embedded engine, so its rounds are measured at 1 and 16 only.
      const conns = w === 'tx' ? CONNECTIONS.filter((c) => c <= 16) : CONNECTIONS;
      // Warm-up: connections, prepared statements, JIT.
      const settle = async () => {
        if (w !== 'tx') return;
        await fetch(baseUrl + '/bench/rollback-all', { method: 'POST' });
        await Bun.sleep(1500); // Basalt's idle timeout rolls back what wrk left open
      };
      if (yard.script) await wrkShort(wrkBin, yard.url, yard.script, 16);
      for (const url of [baseUrl, basaltUrl])
        await wrkShort(wrkBin, url, w === 'mail' ? withNonce(lua[w]!) : lua[w]!, w === 'tx' ? 1 : 16);
      for (const c of conns) {
        const threads = w === 'tx' ? c : Math.min(c, 2);
        const script = () => (w === 'mail' ? withNonce(lua[w]!) : lua[w]!);
        const pairs: { b: Cell; a: Cell }[] = [];
        // Transaction rounds: one pair. A round wrk cuts off leaves begins queued behind the open
        // transaction; on the embedded engine each then holds it until the idle timeout, so a
        // second pair would measure that queue draining, not the rounds.
        const repeats = w === 'tx' ? 1 : REPEATS;
        for (let r = 0; r < repeats; r++) {
          const measure = async (url: string, pid: number, s = script()) => {
            await settle();
            return wrk(wrkBin, url, s, c, threads, pid, SECONDS);
          };
          const baseline = () => measure(yard.url, yard.pid, yard.script || script());
          if (r % 2 === 0) {
            const b = await baseline();
            pairs.push({ b, a: await measure(basaltUrl, basalt.pid!) });
          } else {
            const a = await measure(basaltUrl, basalt.pid!);
            pairs.push({ a, b: await baseline() });
          }
        }
        // The pair whose ratio is the median stands for the cell (its req/s, latency and CPU).
        const ratio = (x: { a: Cell; b: Cell }) => (x.b.rps > 0 ? x.a.rps / x.b.rps : 0);
        pairs.sort((x, y) => ratio(x) - ratio(y));
        const ratios = pairs.map(ratio);
        const { a, b } = pairs[Math.floor(pairs.length / 2)]!;
        const per = w === 'tx' ? 5 : 1;
        const lat = (x: Cell) => `${x.p50.toFixed(1)} / ${x.p99.toFixed(1)}`;
        const errors = (k: 'a' | 'b') => pairs.reduce((n, x) => n + x[k].errors, 0);
        const errs = errors('a') || errors('b') ? ` (errors: base ${errors('b')}, Basalt ${errors('a')})` : '';
        rows.push([
          engine,
          LABEL[w]! + errs,
          String(c),
          fmt(b.rps / per),
          lat(b),
          fmt(a.rps / per),
          lat(a),
          ratio({ a, b }).toFixed(2),
          ratios.length > 1 ? `${ratios[0]!.toFixed(2)}–${ratios.at(-1)!.toFixed(2)}` : '',
          `${b.cpuPer1000.toFixed(3)} / ${a.cpuPer1000.toFixed(3)}`,
          `${Math.round(b.rss)} / ${Math.round(a.rss)}`,
        ]);
        console.error(rows.at(-1)!.join(' | '));
      }
    }
  } finally {
    for (const proc of procs) proc.kill('SIGTERM');
    await Promise.all(procs.map((proc) => proc.exited));
    smtp.stop(true);
    await db.drop();
  }
}

printTable(
  rows,
  `\nHTTP load from wrk against the compiled executable (${REPEATS} pairs of ${SECONDS} s per cell, median pair shown; Bun ${Bun.version})\n`,
);
