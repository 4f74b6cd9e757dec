/**
 * Where the time goes: Basalt from this checkout under Bun's CPU profiler while wrk (a
 * separate process) drives one bench:http workload at it; writes the profile as markdown
 * (hot functions, call tree, time per file) and as a .cpuprofile, for reading before changing
 * code (docs/bench/README.md, Where the time goes). The server runs on one core and wrk (with this
 * script) on the other, as in bench:http; the server's CPU per request is read from /proc.
 *
 *   npm run bench:profile                                  # select, external PostgreSQL
 *   BENCH_WORKLOAD=me BENCH_ENGINE=embedded BENCH_SECONDS=10 npm run bench:profile
 *   BENCH_WORKLOAD=mail npm run bench:profile              # keyed mail acceptance (an SMTP server that never answers)
 *   BENCH_TARGET=bare npm run bench:profile                # the bare baseline (bench/baselines/bare.ts) under the same load
 *   BENCH_TARGET=both BENCH_ENGINE=embedded BENCH_CONNECTIONS=256 npm run bench:profile
 *       # the baseline and Basalt in turn (BENCH_ROUNDS pairs, default 2), pinned as in bench:http,
 *       # and a table of self time per request side by side: by where the code lives, by function
 *   BENCH_WORKLOAD=user-select npm run bench:profile       # a signed-in user's select under row-level security
 *   BENCH_WORKLOAD=owned-select npm run bench:profile      # the same rows with a service key (user-select's yardstick)
 *   BENCH_WORKLOAD=tx npm run bench:profile                # transaction rounds (begin, 3 inserts, commit), one wrk thread per connection
 *   BENCH_WORKLOAD=expand BENCH_TARGET=both BENCH_CONNECTIONS=8 npm run bench:profile
 *       # bench/relations.ts's posts page (20 posts, their authors and 3 latest comments each)
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  BENCH_ITEMS_SQL,
  BENCH_LOG_SQL,
  benchDb,
  benchOwnedSql,
  ownedSelectLua,
  benchKey,
  benchToken,
  freePort,
  LUA_SHOW,
  mailLua,
  withNonce,
  requireWrk,
  selectLua,
  benchSelect,
  cpuSeconds,
  PIN,
  pinToWrkCore,
  printTable,
  txLua,
  waitFor,
} from './support';
import { addSelfTime, compareRows, selfTime } from './cpuprofile';
import { openBasalt } from '../src/services';
import { buildStatement } from '../src/modules/database/query-builder';
import { POSTS_PAGE, queryLua, RELATIONS_SQL, RELATIONS_TABLES } from './relations-data';

const ROOT = resolve(import.meta.dir, '..');
const WORKLOAD = process.env.BENCH_WORKLOAD ?? 'select';
const ENGINE = (process.env.BENCH_ENGINE ?? 'external') as 'external' | 'embedded';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const TARGET = (process.env.BENCH_TARGET ?? 'basalt') as 'basalt' | 'bare' | 'both';
/** With both: rounds of (baseline, Basalt), alternating which goes first. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (TARGET === 'both' ? 2 : 1));
const TOP = Number(process.env.BENCH_TOP ?? 30);
/** Seconds of load before each measured window (not profiled into the comparison). */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
if (TARGET !== 'basalt' && TARGET !== 'bare' && TARGET !== 'both') {
  console.error('BENCH_TARGET is basalt, bare or both');
  process.exit(2);
}
if (!['select', 'me', 'mail', 'user-select', 'owned-select', 'tx', 'expand'].includes(WORKLOAD)) {
  console.error('BENCH_WORKLOAD is select, me, mail, user-select, owned-select, tx or expand');
  process.exit(2);
}

const wrkBin = requireWrk('bench:profile');
const db = await benchDb(ENGINE);
if (!db) process.exit(0);
// Mail goes to a server that accepts connections and never answers: the worker's sends wait (as in bench:http).
const smtp = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
const env = {
  ...db.env,
  BASALT_AUTH_JWT_SECRET: `bench-secret-${'x'.repeat(40)}`,
  BASALT_LOG_LEVEL: 'warn',
  BASALT_MAIL_SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
  BASALT_MAIL_FROM: 'bench@example.com',
  // Transaction rounds: every wrk connection holds one of the key's transactions (as in bench:http).
  BASALT_DB_MAX_TRANSACTIONS_PER_KEY: '1000',
};
const p = await openBasalt({ env, migrate: true });
let key: string;
let token: string;
let uid: string;
let selectSql: string;
let poolMax: number;
/** The posts page's statement, for the baseline to run as it is (expand only). */
let statements: Record<string, { sql: string; params: unknown[] }> = {};
try {
  await p.db.exec(BENCH_ITEMS_SQL + BENCH_LOG_SQL + (WORKLOAD === 'expand' ? RELATIONS_SQL : ''));
  key = await benchKey(p, ['db:query', 'mail:send'], ['bench_items', 'bench_log', 'bench_owned', ...RELATIONS_TABLES]);
  token = await benchToken(p);
  uid = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).sub;
  if (WORKLOAD.endsWith('owned-select') || WORKLOAD === 'user-select') await p.db.exec(benchOwnedSql(uid));
  // The statement Basalt builds for the select workload, for the baseline to run as it is.
  const tables = (await p.services.database.catalog.refresh()).tables;
  selectSql = buildStatement(benchSelect(0) as never, tables.get('bench_items')!, { maxLimit: 1000 }).sql;
  if (WORKLOAD === 'expand') {
    const st = buildStatement(POSTS_PAGE, tables.get(POSTS_PAGE.entity)!, { maxLimit: 1000 });
    statements = { expand: { sql: st.sql, params: st.params } };
  }
  poolMax = p.settings.get('database.pool_max');
} finally {
  await p.shutdown();
}

const out = mkdtempSync(join(tmpdir(), 'basalt-profile-'));
const me = `${LUA_SHOW}wrk.method = "GET"\nwrk.path = "/api/v1/auth/me"\nwrk.headers["Authorization"] = "Bearer ${token}"\nresponse = function(status, headers, body) show(status, body) end\n`;
const scripts: Record<string, string> = {
  select: selectLua(key),
  mail: mailLua(key),
  me,
  'user-select': ownedSelectLua({ token }),
  'owned-select': ownedSelectLua({ key, uid }),
  tx: txLua(key),
  expand: queryLua(key, POSTS_PAGE),
};
let script = join(out, 'load.lua');
writeFileSync(script, scripts[WORKLOAD]!);
if (WORKLOAD === 'mail') script = withNonce(script);
// The bench's own process on wrk's core, with wrk: the profiled server alone on its core.
await pinToWrkCore([process.pid]);

interface Profiled {
  /** The .cpuprofile written. */
  file: string;
  /** The load's window, epoch microseconds. */
  fromUs: number;
  toUs: number;
  requests: number;
  /** The server's CPU (all threads, /proc) per request over the load, microseconds. */
  usPerRequest: number;
}

/** One server (`target`) under the profiler and one wrk run; `round` names its files. */
async function profileOnce(target: 'basalt' | 'bare', round: number): Promise<Profiled> {
  const name = `${WORKLOAD}-${ENGINE}${target === 'bare' ? '-bare' : ''}${ROUNDS > 1 ? `-${round}` : ''}`;
  const port = await freePort();
  const profiled = (scriptPath: string, ...args: string[]) => [
    ...PIN.server,
    process.execPath,
    '--cpu-prof',
    '--cpu-prof-md',
    `--cpu-prof-dir=${out}`,
    `--cpu-prof-name=${name}`,
    scriptPath,
    ...args,
  ];
  const server =
    target === 'bare'
      ? Bun.spawn(profiled(join(import.meta.dir, 'baselines/bare.ts')), {
          env: {
            ...process.env,
            BENCH_PORT: String(port),
            BENCH_POOL_MAX: String(poolMax),
            BENCH_SELECT_SQL: selectSql,
            BENCH_JWT_SECRET: env.BASALT_AUTH_JWT_SECRET,
            BENCH_STATEMENTS: JSON.stringify(statements),
            ...(ENGINE === 'external' ? { BENCH_DB_URL: db!.url } : { BENCH_PG_DIR: join(db!.dataDir, 'pg') }),
          },
          stdout: 'ignore',
          stderr: 'inherit',
        })
      : Bun.spawn(profiled(join(ROOT, 'src/main.ts'), 'serve'), {
          env: { ...process.env, ...env, BASALT_WEB_PORT: String(port) },
          cwd: db!.dataDir,
          stdout: 'ignore',
          stderr: 'inherit',
        });
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitFor(
      target === 'bare' ? `${url}/` : `${url}/readyz`,
      server,
      target === 'bare' ? 'the baseline' : 'basalt',
    );
    // Transaction rounds: one wrk thread per connection, so each connection walks its own round (as bench:http).
    const threads = WORKLOAD === 'tx' ? CONNECTIONS : Math.min(2, CONNECTIONS);
    const wrkFor = async (seconds: number) => {
      const load = Bun.spawn(
        [...PIN.wrk, wrkBin, `-t${threads}`, `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', script, url],
        { stdout: 'pipe' },
      );
      return new Response(load.stdout).text();
    };
    // A warm-up outside the window (JIT, caches, the key and plan caches): a first run read up
    // to twice the CPU per request of the next ones.
    if (WARMUP > 0) await wrkFor(WARMUP);
    const cpu0 = cpuSeconds(server.pid);
    const fromUs = Date.now() * 1000;
    const report = await wrkFor(SECONDS);
    const toUs = Date.now() * 1000;
    const cpu = cpuSeconds(server.pid) - cpu0;
    const requests = Number(/(\d+) requests in/.exec(report)?.[1] ?? 0);
    if (!requests) throw new Error(`wrk sent no requests:\n${report}`);
    console.log(
      `${name}: ${report
        .split('\n')
        .filter((l) => /Requests\/sec|50%|99%/.test(l))
        .map((l) => l.trim())
        .join(', ')}, ${((cpu * 1e6) / requests).toFixed(1)} µs CPU per request`,
    );
    return {
      file: join(out, `${name}.cpuprofile`),
      fromUs,
      toUs,
      requests,
      usPerRequest: (cpu * 1e6) / requests,
    };
  } finally {
    server.kill('SIGTERM');
    await server.exited;
  }
}

const runs: { target: 'basalt' | 'bare'; run: Profiled }[] = [];
try {
  const order: ('basalt' | 'bare')[] = TARGET === 'both' ? ['bare', 'basalt'] : [TARGET];
  for (let round = 0; round < ROUNDS; round++)
    for (const target of round % 2 ? [...order].reverse() : order)
      runs.push({ target, run: await profileOnce(target, round) });
} finally {
  smtp.stop(true);
  await db.drop();
}
if (TARGET !== 'both') {
  console.log(`\nprofile: ${out} (the .md files' "Files" table gives the time per file)`);
  process.exit(0);
}

// Both: each side's samples inside its load windows, in CPU microseconds per request.
const side = (target: 'basalt' | 'bare') => {
  const mine = runs.filter((r) => r.target === target);
  const self = mine
    .map(({ run }) => selfTime(run.file, run.fromUs, run.toUs, ROOT))
    .reduce((a, b) => addSelfTime(a, b));
  const requests = mine.reduce((n, { run }) => n + run.requests, 0);
  const usPerRequest = mine.reduce((n, { run }) => n + run.usPerRequest * run.requests, 0) / Math.max(1, requests);
  return { self, usPerRequest };
};
const a = side('basalt');
const b = side('bare');
console.log(
  `\nCPU per request: Basalt ${a.usPerRequest.toFixed(1)} µs, baseline ${b.usPerRequest.toFixed(1)} µs, ratio ${(b.usPerRequest / a.usPerRequest).toFixed(2)} (${a.self.samples} and ${b.self.samples} samples in the load windows)`,
);
const headers = ['', 'Basalt µs', 'baseline µs', 'difference'];
printTable(
  [
    headers,
    ...compareRows(
      { ...a, self: a.self.byArea, samples: a.self.samples },
      { ...b, self: b.self.byArea, samples: b.self.samples },
      30,
    ),
  ],
  'Self time per request, by where the code lives (largest difference first)',
);
printTable(
  [
    headers,
    ...compareRows(
      { ...a, self: a.self.byFunction, samples: a.self.samples },
      { ...b, self: b.self.byFunction, samples: b.self.samples },
      TOP,
    ),
  ],
  `Self time per request, by function (the ${TOP} largest differences)`,
);
console.log(`\nprofiles: ${out}`);
