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
 *  - GET /api/v1/auth/me vs the same JWT verified by jose, no database;
 *  - keyed mail acceptance (POST /api/v1/mail/send, a fresh Idempotency-Key per request) vs
 *    the same mail-job insert. The SMTP server of the run accepts connections and never
 *    answers, so the queue worker waits instead of competing for the CPU.
 * Reported per cell: req/s, p50, p99 (wrk's latency distribution), the ratio to the
 * baseline, the server's CPU seconds per 1,000 requests (/proc/<pid>/stat) and its RSS.
 * Loopback only; every cell is bounded by BENCH_SECONDS.
 *
 *   npm run bench:http                                     # both engines, 1/16/64/256 connections
 *   BENCH_ENGINES=external BENCH_WORKLOADS=select BENCH_CONNECTIONS=64 npm run bench:http
 */
import { cpSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { benchDb, fmt, printTable } from './support';
import { openPlatform } from '../src/platform';
import { buildStatement } from '../src/modules/database/query-builder';

const ROOT = resolve(import.meta.dir, '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = (process.env.BENCH_CONNECTIONS ?? '1,16,64,256').split(',').map(Number);
const ENGINES = (process.env.BENCH_ENGINES ?? 'external,embedded').split(',') as ('external' | 'embedded')[];
// Transaction rounds last: wrk stops mid-round, and the transaction it leaves open holds the
// embedded engine until the idle timeout (1 s in this run) rolls it back.
const WORKLOADS = (process.env.BENCH_WORKLOADS ?? 'select,me,mail,tx').split(',');
const JWT_SECRET = 'bench-secret-' + 'x'.repeat(40);
const CLK_TCK = 100;

function requireWrk(): string {
  const found = Bun.which('wrk');
  if (!found) {
    console.error('bench:http needs wrk (Debian package): apt-get install -y wrk');
    process.exit(2);
  }
  return found;
}

async function buildExecutable(): Promise<string> {
  const exe = process.env.BENCH_EXE ?? join(mkdtempSync(join(tmpdir(), 'basalt-bench-exe-')), 'basalt');
  if (process.env.BENCH_EXE && existsSync(exe)) return exe;
  const proc = Bun.spawn([process.execPath, join(ROOT, 'build.ts'), '--outfile', exe], { cwd: ROOT, stdout: 'inherit', stderr: 'inherit' });
  if ((await proc.exited) !== 0) throw new Error('build.ts failed');
  return exe;
}

/** A TCP server that accepts and never answers: the mail worker's sends wait on it. */
function silentSmtp() {
  return Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
}

async function waitFor(url: string, proc: Subprocess, what: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (proc.exitCode !== null) throw new Error(`${what} exited with ${proc.exitCode}`);
    if (await fetch(url).then((r) => r.status < 500, () => false)) return;
    await Bun.sleep(50);
  }
  throw new Error(`${what} did not answer ${url}`);
}

function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

interface Cell {
  rps: number;
  p50: number;
  p99: number;
  cpuPer1000: number;
  rss: number;
  errors: number;
}

function ms(v: string, unit: string): number {
  return unit === 'us' ? Number(v) / 1000 : unit === 's' ? Number(v) * 1000 : Number(v);
}

async function wrk(bin: string, url: string, script: string, connections: number, threads: number, pid: number): Promise<Cell> {
  const cpu0 = cpuSeconds(pid);
  const proc = Bun.spawn([bin, '-t', String(threads), '-c', String(connections), '-d', `${SECONDS}s`, '--timeout', '10s', '--latency', '-s', script, url], { stdout: 'pipe', stderr: 'pipe' });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`wrk failed (${code}): ${err}`);
  if (err.trim()) console.error(err.trim().split('\n').slice(0, 2).join('\n'));
  const cpu = cpuSeconds(pid) - cpu0;
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0);
  const total = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
  const lat = (p: string) => {
    const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
    return m ? ms(m[1]!, m[2]!) : NaN;
  };
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const sockErr = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = non2xx + (sockErr ? sockErr.slice(1).reduce((n, x) => n + Number(x), 0) : 0);
  return { rps, p50: lat('50'), p99: lat('99'), cpuPer1000: total ? (cpu / total) * 1000 : NaN, rss: rssMiB(pid), errors };
}

/** The wrk scripts of one engine's run: the key and token are written in. */
function scripts(dir: string, key: string, token: string): Record<string, string> {
  const json = `wrk.headers["Content-Type"] = "application/json"\nwrk.headers["X-API-Key"] = "${key}"\n`;
  // The first refused answer of each thread goes to wrk's stderr, so an error count comes with its reason.
  const show = `local shown = false
function show(status, body)
  if status >= 300 and not shown then shown = true; io.stderr:write("refused: " .. status .. " " .. string.sub(body, 1, 200) .. "\\n") end
end
`;
  const files: Record<string, string> = {
    select: `${json}${show}wrk.method = "POST"
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, "/api/v1/db/query", nil, '{"entity":"bench_items","action":"select","fields":["id","grp","name","price"],"filters":[{"field":"grp","op":"eq","value":' .. (i % 1000) .. '}],"limit":10}')
end
response = function(status, headers, body) show(status, body) end
`,
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
    mail: `${json}${show}wrk.method = "POST"
local threads, counter = 0, 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
request = function()
  counter = counter + 1
  local k = string.format("%s-%04x-4000-8000-%012x", NONCE, tid or 0, counter)
  local headers = { ["Content-Type"] = "application/json", ["X-API-Key"] = wrk.headers["X-API-Key"], ["Idempotency-Key"] = k }
  return wrk.format(nil, "/api/v1/mail/send", headers, '{"to":["ada@example.com"],"subject":"bench","text":"hello"}')
end
response = function(status, headers, body) show(status, body) end
`,
  };
  const paths: Record<string, string> = {};
  for (const [name, text] of Object.entries(files)) {
    paths[name] = join(dir, `${name}.lua`);
    writeFileSync(paths[name]!, text);
  }
  return paths;
}

/** Each mail cell gets its own key prefix so no request is a replay of an earlier cell's. */
function withNonce(script: string): string {
  const nonce = crypto.randomUUID().slice(0, 8);
  const copy = script.replace(/\.lua$/, `-${nonce}.lua`);
  writeFileSync(copy, `NONCE = "${nonce}"\n` + readFileSync(script, 'utf8'));
  return copy;
}

const LABEL: Record<string, string> = {
  select: 'select 10 rows (indexed filter)',
  tx: 'transaction round (rounds/s)',
  me: 'GET /api/v1/auth/me',
  mail: 'keyed mail acceptance',
};

const rows: string[][] = [['engine', 'workload', 'conns', 'baseline req/s', 'p50/p99 ms', 'Basalt req/s', 'p50/p99 ms', 'ratio', 'CPU s/1k (base/Basalt)', 'RSS MiB (base/Basalt)']];

const wrkBin = requireWrk();
const exe = await buildExecutable();

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
    let key: string, token: string, selectSql: string, poolMax: number;
    try {
      await p.db.exec(`
        CREATE TABLE public.bench_items (id serial PRIMARY KEY, grp int4 NOT NULL, name text NOT NULL, price numeric(10,2), created_at timestamptz NOT NULL DEFAULT now());
        CREATE INDEX bench_items_grp ON public.bench_items (grp);
        INSERT INTO public.bench_items (grp, name, price) SELECT g % 1000, 'item ' || g, (g % 100) + 0.99 FROM generate_series(1, 10000) g;
        CREATE TABLE public.bench_log (id serial PRIMARY KEY, n int4 NOT NULL, note text);
        ANALYZE public.bench_items;`);
      key = (await p.services.keys.create({ type: 'service', service: 'bench', permissions: ['db:query', 'mail:send'], tables: ['bench_items', 'bench_log'] })).key;
      const meta = { ip: '127.0.0.1', userAgent: 'bench', origin: 'http://127.0.0.1' };
      await p.services.auth.register({ email: 'bench@example.com', password: 'bench-password-1' }, meta);
      token = (await p.services.auth.login({ email: 'bench@example.com', password: 'bench-password-1' }, meta)).access_token;
      const snap = await p.services.database.catalog.refresh();
      const body = { entity: 'bench_items', action: 'select', fields: ['id', 'grp', 'name', 'price'], filters: [{ field: 'grp', op: 'eq', value: 0 }], limit: 10 };
      selectSql = buildStatement(body as never, snap.tables.get('bench_items')!, { maxLimit: 1000 }).sql;
      poolMax = p.settings.get<number>('database.pool_max');
    } finally {
      await p.shutdown();
    }
    // The embedded baseline opens its own copy of the data (the original belongs to Basalt).
    const baseDir = mkdtempSync(join(tmpdir(), 'basalt-bench-base-'));
    if (engine === 'embedded') cpSync(join(db.dataDir, 'pg'), join(baseDir, 'pg'), { recursive: true });

    const port = await freePort();
    const basalt = Bun.spawn([exe, 'serve'], { env: { PATH: '/usr/bin:/bin', HOME: db.dataDir, ...env, BASALT_WEB_PORT: String(port) }, cwd: db.dataDir, stdout: 'ignore', stderr: 'inherit' });
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

    const lua = scripts(mkdtempSync(join(tmpdir(), 'basalt-bench-lua-')), key, token);
    for (const w of WORKLOADS) {
      // One transaction holds the embedded engine, so its rounds are measured at 1 and 16 only.
      const conns = w === 'tx' ? CONNECTIONS.filter((c) => c <= 16) : CONNECTIONS;
      // Warm-up: connections, prepared statements, JIT.
      const settle = async () => {
        if (w !== 'tx') return;
        await fetch(baseUrl + '/bench/rollback-all', { method: 'POST' });
        await Bun.sleep(1500); // Basalt's idle timeout rolls back what wrk left open
      };
      for (const url of [baseUrl, basaltUrl]) await wrkShort(wrkBin, url, w === 'mail' ? withNonce(lua[w]!) : lua[w]!, w === 'tx' ? 1 : 16);
      for (const c of conns) {
        const threads = w === 'tx' ? c : Math.min(c, 2);
        const script = () => (w === 'mail' ? withNonce(lua[w]!) : lua[w]!);
        await settle();
        const b = await wrk(wrkBin, baseUrl, script(), c, threads, base.pid);
        await settle();
        const a = await wrk(wrkBin, basaltUrl, script(), c, threads, basalt.pid);
        const per = w === 'tx' ? 5 : 1;
        const lat = (x: Cell) => `${x.p50.toFixed(1)} / ${x.p99.toFixed(1)}`;
        const errs = a.errors || b.errors ? ` (errors: base ${b.errors}, Basalt ${a.errors})` : '';
        rows.push([
          engine, LABEL[w]! + errs, String(c), fmt(b.rps / per), lat(b), fmt(a.rps / per), lat(a), (a.rps / b.rps).toFixed(2),
          `${b.cpuPer1000.toFixed(3)} / ${a.cpuPer1000.toFixed(3)}`, `${Math.round(b.rss)} / ${Math.round(a.rss)}`,
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

async function wrkShort(bin: string, url: string, script: string, connections: number) {
  const proc = Bun.spawn([bin, '-t', String(connections === 1 ? 1 : 2), '-c', String(connections), '-d', '1s', '-s', script, url], { stdout: 'ignore', stderr: 'ignore' });
  await proc.exited;
}

async function freePort(): Promise<number> {
  const s = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() });
  const port = s.port!;
  s.stop(true);
  return port;
}

printTable(rows, `\nHTTP load from wrk against the compiled executable (${SECONDS} s per cell, Bun ${Bun.version})\n`);
