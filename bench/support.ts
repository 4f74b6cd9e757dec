/**
 * Small pieces every benchmark shares: statistics, number formatting, a bounded load loop, a scratch
 * database, and the wrk runner with the process meters of the HTTP benchmarks.
 */
import postgres from 'postgres';
import type { Subprocess } from 'bun';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freshDb, type FreshDb } from '../test/helpers/engines';
import type { Basalt } from '../src/services';

export const ADMIN_URL = process.env.BASALT_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
export const p99 = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]!;
export const fmt = (x: number): string => Math.round(x).toLocaleString('en-US');

/**
 * Send requests from `concurrency` workers while `more()` holds; every answer must have
 * status `expect`. Returns each request's latency in ms and the elapsed seconds.
 */
async function load(concurrency: number, more: () => boolean, send: () => Promise<Response>, expect: number) {
  const times: number[] = [];
  const worker = async () => {
    while (more()) {
      const t0 = performance.now();
      const r = await send();
      await r.arrayBuffer();
      times.push(performance.now() - t0);
      if (r.status !== expect) throw new Error(`unexpected status ${r.status}`);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { times, seconds: (performance.now() - start) / 1000 };
}

/**
 * Send `count` requests from `concurrency` workers; every answer must have status `expect`.
 * Returns requests per second and the median latency in ms.
 */
export async function countedLoad(count: number, concurrency: number, send: () => Promise<Response>, expect: number) {
  let next = 0;
  const { times, seconds } = await load(concurrency, () => next++ < count, send, expect);
  return { perSecond: count / seconds, p50: median(times) };
}

/** Requests from `concurrency` workers for `seconds`; requests per second, their count, the p50 and p99 latency in ms. */
export async function timedLoad(seconds: number, concurrency: number, send: () => Promise<Response>, expect: number) {
  const end = performance.now() + seconds * 1000;
  const r = await load(concurrency, () => performance.now() < end, send, expect);
  return { perSecond: r.times.length / r.seconds, count: r.times.length, p50: median(r.times), p99: p99(r.times) };
}

/** A fresh database on BASALT_BENCH_DATABASE_URL (default: the local server), dropped by `drop()`. */
export async function externalDb(): Promise<FreshDb> {
  const name = `basalt_bench_${crypto.randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(ADMIN_URL);
  u.pathname = '/' + name;
  const dataDir = mkdtempSync(join(tmpdir(), 'basalt-bench-'));
  return {
    engine: 'external',
    env: { BASALT_DATA_DIR: dataDir, BASALT_DATABASE_URL: u.toString() },
    dataDir,
    url: u.toString(),
    drop: async () => {
      const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
      await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      await a.unsafe(`DROP ROLE IF EXISTS basalt_auth_${name}`).catch(() => {});
      await a.end();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A fresh database of `engine` for one bench run, or undefined (the reason printed) when none can be had. */
export async function benchDb(engine: 'external' | 'embedded'): Promise<FreshDb | undefined> {
  try {
    return engine === 'external' ? await externalDb() : await freshDb('embedded');
  } catch (e) {
    console.error(`skipping ${engine}: ${(e as Error).message}`);
    return undefined;
  }
}

/** Print `rows` (the first is the header) as a Markdown table, after `title` when given. */
export function printTable(rows: string[][], title?: string): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => '| ' + r.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
  if (title) console.log(title);
  console.log(line(rows[0]!));
  console.log('| ' + widths.map((w) => '-'.repeat(w)).join(' | ') + ' |');
  for (const r of rows.slice(1)) console.log(line(r));
}

// ---- HTTP load from wrk against servers started as their own processes (bench:http, bench:peers) ----

/** The path of wrk, or exit with how to install it. */
export function requireWrk(script: string): string {
  const found = Bun.which('wrk');
  if (!found) {
    console.error(`${script} needs wrk (Debian package): apt-get install -y wrk`);
    process.exit(2);
  }
  return found;
}

/** The compiled executable: BENCH_EXE when it exists, else built by build.ts into a temp dir. */
export async function buildExecutable(root: string): Promise<string> {
  // Resolved: the servers are started with another working directory (their data dirs).
  const exe = process.env.BENCH_EXE
    ? resolve(process.env.BENCH_EXE)
    : join(mkdtempSync(join(tmpdir(), 'basalt-bench-exe-')), 'basalt');
  if (process.env.BENCH_EXE && existsSync(exe)) return exe;
  const proc = Bun.spawn([process.execPath, join(root, 'build.ts'), '--outfile', exe], {
    cwd: root,
    stdout: 'inherit',
    stderr: 'inherit',
  });
  if ((await proc.exited) !== 0) throw new Error('build.ts failed');
  return exe;
}

/** Wait until `url` answers below 500 (30 s by default), or throw when the process exits first. */
export async function waitFor(
  url: string,
  proc: Subprocess,
  what: string,
  timeoutMs = 30_000,
  headers?: Record<string, string>,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (proc.exitCode !== null) throw new Error(`${what} exited with ${proc.exitCode}`);
    if (
      await fetch(url, { headers }).then(
        (r) => r.status < 500,
        () => false,
      )
    )
      return;
    await Bun.sleep(50);
  }
  throw new Error(`${what} did not answer ${url}`);
}

/**
 * Where the bare baseline reads the data: external, the same database; embedded, its own copy
 * of the data directory (the original belongs to Basalt), in a new directory pushed to `scratch`.
 */
export function baselineData(db: FreshDb, scratch: string[]): { dbUrl?: string; pgDir?: string } {
  if (db.engine === 'external') return { dbUrl: db.url };
  const dir = mkdtempSync(join(tmpdir(), 'basalt-bench-base-'));
  scratch.push(dir);
  cpSync(join(db.dataDir, 'pg'), join(dir, 'pg'), { recursive: true });
  return { pgDir: join(dir, 'pg') };
}

/**
 * The bare baseline (bench/baselines/bare.ts) as its own process on the server core, pushed to
 * `procs` (for the caller to end) and answering once this returns. `env`: its BENCH_* settings
 * beside the database's (external: `dbUrl`; embedded: its own copy of the data, `pgDir`).
 */
export async function startBaseline(
  procs: Subprocess[],
  db: { dbUrl?: string; pgDir?: string },
  env: Record<string, string>,
): Promise<{ proc: Subprocess; url: string }> {
  const port = await freePort();
  const proc = Bun.spawn([...PIN.server, process.execPath, join(import.meta.dir, 'baselines/bare.ts')], {
    env: {
      ...process.env,
      BENCH_PORT: String(port),
      ...env,
      ...(db.dbUrl ? { BENCH_DB_URL: db.dbUrl } : { BENCH_PG_DIR: db.pgDir! }),
    },
    stdout: 'ignore',
    stderr: 'inherit',
  });
  procs.push(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(url + '/', proc, 'the baseline');
  return { proc, url };
}

/** The compiled executable `exe` serving `dataDir` with `env` on the server core, pushed to `procs`, ready when this returns. */
export async function startBasalt(
  procs: Subprocess[],
  exe: string,
  dataDir: string,
  env: Record<string, string>,
): Promise<{ proc: Subprocess; url: string }> {
  const port = await freePort();
  const proc = Bun.spawn([...PIN.server, exe, 'serve'], {
    env: { PATH: '/usr/bin:/bin', HOME: dataDir, ...env, BASALT_WEB_PORT: String(port) },
    cwd: dataDir,
    stdout: 'ignore',
    stderr: 'inherit',
  });
  procs.push(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(url + '/readyz', proc, 'basalt');
  return { proc, url };
}

/**
 * BENCH_SERVER_ENV: extra environment (JSON) for the servers a bench starts, e.g.
 * '{"MIMALLOC_PURGE_DELAY":"100"}' (docs/operations.md, "Memory and CPU"); {} when unset.
 */
export const SERVER_ENV = JSON.parse(process.env.BENCH_SERVER_ENV ?? '{}') as Record<string, string>;

/** A loopback port nothing listens on (just now), never the same one twice in this process. */
import { freePort } from '../test/helpers/binary';
export { freePort };

const CLK_TCK = 100;

/** User + system CPU seconds of a process, all its threads (/proc/<pid>/stat). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/**
 * Busy and stolen seconds of core `cpu` so far (/proc/stat: user, nice, system, irq, softirq;
 * steal: time the hypervisor ran something else while this core wanted to run).
 */
export function coreSeconds(cpu: number): { busy: number; steal: number } {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${cpu} `));
  if (!line) return { busy: 0, steal: 0 };
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  return { busy: (f[0]! + f[1]! + f[2]! + f[5]! + f[6]!) / CLK_TCK, steal: (f[7] ?? 0) / CLK_TCK };
}

/**
 * A fixed piece of server-like JavaScript (objects built, serialized and parsed, maps, strings),
 * the same every time, run in a fresh process on the server's core: its CPU milliseconds say how
 * fast that core is just now. bench:http reads it before each cell, so two runs whose ratios
 * disagree show whether the machine itself ran slower in one (a busy neighbour on the host shares
 * its caches and memory bandwidth without showing as steal).
 */
const CALIBRATION = `
const work = () => {
  const m = new Map();
  let n = 0;
  for (let i = 0; i < 20000; i++) {
    const o = { id: i, name: 'item ' + i, price: (i % 100) + 0.99, tags: ['a', 'b', String(i % 7)] };
    const t = JSON.stringify(o);
    const back = JSON.parse(t);
    m.set(t.slice(0, 12), back);
    n += back.tags.length + t.length;
  }
  return n + m.size;
};
work();
const c0 = process.cpuUsage();
for (let r = 0; r < 3; r++) work();
const u = process.cpuUsage(c0);
console.log(((u.user + u.system) / 1000).toFixed(2));
`;

/** CPU milliseconds of CALIBRATION on the server's core (any core when not pinning). */
export async function coreSpeedMs(): Promise<number> {
  const proc = Bun.spawn([...PIN.server, process.execPath, '-e', CALIBRATION], { stdout: 'pipe', stderr: 'ignore' });
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  return Number(out.trim());
}

/** Resident set size of a process in MiB (/proc/<pid>/status). */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/**
 * The cores the HTTP benchmarks pin to (`taskset -c`): the server under test on one, wrk on the
 * other, so wrk never takes the server's core (BENCH_PIN=0 turns it off; needs taskset and 2 cores).
 */
export const PIN = ((): { server: string[]; wrk: string[] } => {
  const taskset = Bun.which('taskset');
  if (process.env.BENCH_PIN === '0' || !taskset || navigator.hardwareConcurrency < 2) return { server: [], wrk: [] };
  return { server: [taskset, '-c', '0'], wrk: [taskset, '-c', '1'] };
})();

/**
 * Move processes `pids` (all their threads) to the wrk core, PIN's other side: the bench's own
 * process, and PostgreSQL's backends serving a bench database, so that nothing but the server
 * under test runs on its core. Each pid is moved once (`moved` remembers); a pid that ended
 * since it was found is skipped. No-op when not pinning.
 */
export async function pinToWrkCore(pids: number[], moved = new Set<number>()): Promise<void> {
  if (!PIN.wrk.length) return;
  const fresh = pids.filter((pid) => !moved.has(pid));
  if (!fresh.length) return;
  await Promise.all(
    fresh.map(async (pid) => {
      moved.add(pid);
      const proc = Bun.spawn([PIN.wrk[0]!, '-a', '-p', '-c', PIN.wrk[2]!, String(pid)], {
        stdout: 'ignore',
        stderr: 'ignore',
      });
      await proc.exited;
    }),
  );
}

/** One wrk run against one server: throughput, latency, the server's CPU per 1,000 requests, its RSS after. */
export interface Cell {
  rps: number;
  p50: number;
  p99: number;
  /** Requests wrk completed. */
  requests: number;
  /** The server process's user + system CPU seconds over the run (its threads; children excluded). */
  cpu: number;
  cpuPer1000: number;
  /** CPU seconds of `also` over the run (e.g. the server's PostgreSQL backends), when given. */
  alsoCpu?: number;
  /**
   * Pinned runs: milliseconds per second that the server's core spent on anything but the server
   * (other processes, interrupts), and that the hypervisor took from it (steal). Near 0 on a quiet
   * machine; a run with more has the server's caches shared and reads higher.
   */
  otherMsPerSecond?: number;
  stealMsPerSecond?: number;
  rss: number;
  errors: number;
}

function ms(v: string, unit: string): number {
  return unit === 'us' ? Number(v) / 1000 : unit === 's' ? Number(v) * 1000 : Number(v);
}

/** One server a wrk run loads and measures: its URL, the Lua script, its pid and, optionally, another CPU meter. */
export interface WrkTarget {
  url: string;
  script: string;
  pid: number;
  /** A CPU meter read before and after (e.g. the server's PostgreSQL backends). */
  also?: () => Promise<number>;
}

/**
 * Run wrk for `seconds` against `url` with the Lua `script`, measuring the server process `pid`
 * (and, with `also`, another CPU meter read before and after: e.g. its database backends).
 * wrk runs on its own core when PIN has one.
 */
export async function wrk(
  bin: string,
  url: string,
  script: string,
  connections: number,
  threads: number,
  pid: number,
  seconds: number,
  also?: () => Promise<number>,
): Promise<Cell> {
  return (await wrkTogether(bin, [{ url, script, pid, also }], connections, threads, seconds))[0]!;
}

/**
 * One wrk process per target, all started at once and run for the same `seconds`, each server
 * measured over the same window: a change in the machine's speed (a neighbour on the host, the
 * core's clock) falls on every target alike, which is what bench:http's side-by-side pairs rely
 * on. The wrk processes share the wrk core when PIN has one; `otherMsPerSecond` is what the
 * server's core spent on anything but the targets.
 */
export async function wrkTogether(
  bin: string,
  targets: WrkTarget[],
  connections: number,
  threads: number,
  seconds: number,
): Promise<Cell[]> {
  const also0 = await Promise.all(targets.map((t) => (t.also ? t.also() : 0)));
  const core = PIN.server.length ? Number(PIN.server[2]) : undefined;
  const core0 = core === undefined ? undefined : coreSeconds(core);
  const t0 = performance.now();
  const cpu0 = targets.map((t) => cpuSeconds(t.pid));
  const procs = targets.map((t) =>
    Bun.spawn(
      [
        ...PIN.wrk,
        bin,
        '-t',
        String(threads),
        '-c',
        String(connections),
        '-d',
        `${seconds}s`,
        '--timeout',
        '10s',
        '--latency',
        '-s',
        t.script,
        t.url,
      ],
      { stdout: 'pipe', stderr: 'pipe' },
    ),
  );
  const outs = await Promise.all(
    procs.map((proc) => Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])),
  );
  const cpu = targets.map((t, i) => cpuSeconds(t.pid) - cpu0[i]!);
  const core1 = core === undefined ? undefined : coreSeconds(core);
  const elapsed = (performance.now() - t0) / 1000;
  const alsoCpu = await Promise.all(targets.map(async (t, i) => (t.also ? (await t.also()) - also0[i]! : undefined)));
  const others =
    core0 && core1
      ? {
          otherMsPerSecond: (Math.max(0, core1.busy - core0.busy - cpu.reduce((a, b) => a + b, 0)) / elapsed) * 1000,
          stealMsPerSecond: ((core1.steal - core0.steal) / elapsed) * 1000,
        }
      : {};
  return targets.map((t, i) => {
    const [out, err, code] = outs[i]!;
    if (code !== 0) throw new Error(`wrk failed (${code}): ${err}`);
    if (err.trim()) console.error(err.trim().split('\n').slice(0, 2).join('\n'));
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0);
    const total = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
    const lat = (p: string) => {
      const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
      return m ? ms(m[1]!, m[2]!) : NaN;
    };
    const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
    const sockErr = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    const errors = non2xx + (sockErr ? sockErr.slice(1).reduce((n, x) => n + Number(x), 0) : 0);
    return {
      rps,
      p50: lat('50'),
      p99: lat('99'),
      requests: total,
      cpu: cpu[i]!,
      cpuPer1000: total ? (cpu[i]! / total) * 1000 : NaN,
      alsoCpu: alsoCpu[i],
      ...others,
      rss: rssMiB(t.pid),
      errors,
    };
  });
}

/** A wrk run (1 s by default) whose figures are thrown away: connections, prepared statements, JIT. */
export async function wrkShort(
  bin: string,
  url: string,
  script: string,
  connections: number,
  seconds = 1,
): Promise<void> {
  const proc = Bun.spawn(
    [
      ...PIN.wrk,
      bin,
      '-t',
      String(connections === 1 ? 1 : 2),
      '-c',
      String(connections),
      '-d',
      `${seconds}s`,
      '-s',
      script,
      url,
    ],
    { stdout: 'ignore', stderr: 'ignore' },
  );
  await proc.exited;
}

/** The table the select workload reads: 10,000 rows, 1,000 groups of 10, an index on the group. */
export const BENCH_ITEMS_SQL = `
  CREATE TABLE public.bench_items (id serial PRIMARY KEY, grp int4 NOT NULL, name text NOT NULL, price numeric(10,2), created_at timestamptz NOT NULL DEFAULT now());
  CREATE INDEX bench_items_grp ON public.bench_items (grp);
  INSERT INTO public.bench_items (grp, name, price) SELECT g % 1000, 'item ' || g, (g % 100) + 0.99 FROM generate_series(1, 10000) g;
  ANALYZE public.bench_items;`;

/**
 * The user-select workload's table (docs/database.md, Users' own data): 100,000 rows of 100
 * owners, 1,000 each in 100 groups of 10, an index on (owner_id, grp), and the policy
 * owner_id = basalt.uid(). Owner 0 is the bench user `uid`.
 */
export const benchOwnedSql = (uid: string) => `
  CREATE TABLE public.bench_owned (id serial PRIMARY KEY, owner_id uuid NOT NULL, grp int4 NOT NULL, name text NOT NULL, price numeric(10,2));
  CREATE INDEX bench_owned_owner_grp ON public.bench_owned (owner_id, grp);
  INSERT INTO public.bench_owned (owner_id, grp, name, price)
    SELECT CASE WHEN g % 100 = 0 THEN '${uid}'::uuid ELSE md5((g % 100)::text)::uuid END, (g / 100) % 100, 'item ' || g, (g % 100) + 0.99
      FROM generate_series(1, 100000) g;
  ALTER TABLE public.bench_owned ENABLE ROW LEVEL SECURITY;
  GRANT SELECT ON public.bench_owned TO basalt_user;
  CREATE POLICY own ON public.bench_owned FOR SELECT TO basalt_user USING (owner_id = basalt.uid());
  ANALYZE public.bench_owned;`;

/**
 * The user-select workload's wrk script: 10 of the bench user's rows by group (i % 100).
 * As the user (`token`: the policy picks the owner) or, for its yardstick, with service key
 * `key` (no policy: the owner is a filter), reading the same rows through the same index.
 */
export function ownedSelectLua(who: { token: string } | { key: string; uid: string }): string {
  const header =
    'token' in who ? `wrk.headers["Authorization"] = "Bearer ${who.token}"` : `wrk.headers["X-API-Key"] = "${who.key}"`;
  const owner = 'uid' in who ? `{"field":"owner_id","op":"eq","value":"${who.uid}"},` : '';
  return `wrk.headers["Content-Type"] = "application/json"
${header}
${LUA_SHOW}wrk.method = "POST"
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, "/api/v1/db/query", nil, '{"entity":"bench_owned","action":"select","fields":["id","grp","name","price"],"filters":[${owner}{"field":"grp","op":"eq","value":' .. (i % 100) .. '}],"limit":10}')
end
response = function(status, headers, body) show(status, body) end
`;
}

/** The row of bench_items number `g` (1..10,000), for servers that load the same data through their own API. */
export const benchItem = (g: number) => ({ grp: g % 1000, name: `item ${g}`, price: (g % 100) + 0.99 });

/**
 * A wrk script line that prints the first refused answer of each thread to stderr, so an
 * error count comes with its reason. Defines show(status, body).
 */
export const LUA_SHOW = `local shown = false
function show(status, body)
  if status >= 300 and not shown then shown = true; io.stderr:write("refused: " .. status .. " " .. string.sub(body, 1, 200) .. "\\n") end
end
`;

/**
 * Keyed mail acceptance: `POST /api/v1/mail/send` with inline text and a fresh
 * Idempotency-Key per request, with service key `key`. The keys start with NONCE, which
 * `withNonce` writes in, so no request replays one of an earlier run.
 */
export function mailLua(key: string): string {
  return `wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-API-Key"] = "${key}"
${LUA_SHOW}wrk.method = "POST"
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
`;
}

/** A copy of the mail script `script` with a fresh NONCE: each run's Idempotency-Keys are its own. */
export function withNonce(script: string): string {
  const nonce = crypto.randomUUID().slice(0, 8);
  const copy = script.replace(/\.lua$/, `-${nonce}.lua`);
  writeFileSync(copy, `NONCE = "${nonce}"\n` + readFileSync(script, 'utf8'));
  return copy;
}

/** The select workload's request body: 10 rows of one group (`grp` = value). */
export function benchSelect(value: number) {
  return {
    entity: 'bench_items',
    action: 'select',
    fields: ['id', 'grp', 'name', 'price'],
    filters: [{ field: 'grp', op: 'eq', value }],
    limit: 10,
  };
}

/** The select workload's wrk script: `benchSelect` with the group counting up (i % 1000), sent with service key `key`. */
export function selectLua(key: string): string {
  // The body above as Lua builds it, with the group counting up per request.
  const [before, after] = JSON.stringify(benchSelect(-1)).split('"value":-1');
  return `wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-API-Key"] = "${key}"
${LUA_SHOW}wrk.method = "POST"
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, "/api/v1/db/query", nil, '${before}"value":' .. (i % 1000) .. '${after}')
end
response = function(status, headers, body) show(status, body) end
`;
}

/** The transaction round's table: the rows its inserts write. */
export const BENCH_LOG_SQL = 'CREATE TABLE public.bench_log (id serial PRIMARY KEY, n int4 NOT NULL, note text);';

/**
 * The transaction round's wrk script, with service key `key`: begin, 3 inserts into bench_log
 * with its transaction_id, commit (5 requests). Run it with one wrk thread per connection, so
 * each connection walks its own round.
 */
export function txLua(key: string): string {
  return `wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-API-Key"] = "${key}"
${LUA_SHOW}local step, id = 0, ""
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
`;
}

/** A service key named `bench` with these permissions on these tables, made in `p`. */
export async function benchKey(p: Basalt, permissions: string[], tables: string[]): Promise<string> {
  return (await p.services.keys.create({ type: 'service', service: 'bench', permissions, tables })).key;
}

const credentials = { email: 'bench@example.com', password: 'bench-password-1' };

/** The access token of a user registered and signed in through `p` (the /me workload's caller). */
export async function benchToken(p: Basalt): Promise<string> {
  const meta = { ip: '127.0.0.1', userAgent: 'bench', origin: 'http://127.0.0.1' };
  await p.services.auth.register(credentials, meta);
  const r = await p.services.auth.login(credentials, meta);
  if (!('access_token' in r)) throw new Error('bench user must not have a second factor');
  return r.access_token;
}

/**
 * A fresh access token for benchToken's user, signed in over HTTP at `url` (a running Basalt on
 * the same data). An access token lives 15 minutes, less than a whole engine's run of bench:http.
 */
export async function benchSignIn(url: string): Promise<string> {
  const r = await fetch(`${url}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(credentials),
  });
  const body = (await r.json()) as { data?: { access_token?: string } };
  if (r.status !== 200 || !body.data?.access_token)
    throw new Error(`bench sign-in: ${r.status} ${JSON.stringify(body)}`);
  return body.data.access_token;
}
