/**
 * Relations and aggregates of the Database API (docs/database.md, "Relations", "Aggregates"),
 * as CPU per request against the bare baseline (bench/baselines/bare.ts) running the very
 * statement Basalt builds for the same body, through the same driver and pool size:
 *  - posts page: 20 posts, each with its author (many-to-one) and its 3 latest comments
 *    (one-to-many), from 2,000 posts and 100,000 comments (target ratio ≥ 0.7);
 *  - aggregate: 100,000 orders grouped by their customer's country (a many-to-one path),
 *    count and sum, sorted by the sum: reported, no target (the database's work dominates).
 * Both servers are their own processes (the compiled executable, built by build.ts or taken
 * from BENCH_EXE), loaded by wrk one after the other, BENCH_REPEATS times each, order
 * alternating; ratio = baseline CPU per request / Basalt's (the server processes only; on
 * external PostgreSQL the backends' work is not counted on either side). Figures taken on a
 * machine shared with other work are noisy: compare ratios of one run, not runs.
 *
 *   bun bench/relations.ts                       # both engines, BENCH_SECONDS=4, 8 connections
 *   BENCH_ENGINES=external BENCH_REPEATS=1 BENCH_SECONDS=2 bun bench/relations.ts   # a quick look
 *   BENCH_WORKLOADS=expand bun bench/relations.ts   # the posts page only (or: aggregate)
 *   BENCH_SERVER_ENV='{"MIMALLOC_PURGE_DELAY":"10000"}' bun bench/relations.ts
 *       # both servers with the same extra environment (here: the allocator setting `basalt serve`
 *       # gives itself, src/allocator.ts, for the baseline too: like for like)
 * Each server is first loaded BENCH_WARMUP seconds (default 10) and not measured: the JIT's work
 * on a program Basalt's size goes on for several seconds under load, and is not a cost per request.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { openBasalt } from '../src/services';
import { buildStatement } from '../src/modules/database/query-builder';
import type { QueryBody } from '../src/modules/database/model';
import { ORDERS_BY_COUNTRY, POSTS_PAGE, queryLua, RELATIONS_SQL, RELATIONS_TABLES } from './relations-data';
import {
  benchDb,
  benchKey,
  buildExecutable,
  fmt,
  median,
  printTable,
  requireWrk,
  SERVER_ENV,
  baselineData,
  startBaseline,
  startBasalt,
  wrk,
  wrkShort,
  type Cell,
} from './support';

const ROOT = resolve(import.meta.dir, '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 10);
/** Which workloads run: `expand` (the posts page), `aggregate`, or both (the default). */
const KINDS = (process.env.BENCH_WORKLOADS ?? 'expand,aggregate').split(',');
const ENGINES = (process.env.BENCH_ENGINES ?? 'external,embedded').split(',') as ('external' | 'embedded')[];

const WORKLOADS: { name: string; kind: 'expand' | 'aggregate'; body: QueryBody }[] = [
  { name: 'posts page: 20 posts + author + 3 latest comments', kind: 'expand', body: POSTS_PAGE },
  { name: 'aggregate: 100,000 orders by customer_id.country', kind: 'aggregate', body: ORDERS_BY_COUNTRY },
];

const wrkBin = requireWrk('bench/relations.ts');
const exe = await buildExecutable(ROOT);
const table: string[][] = [
  [
    'engine',
    'workload',
    'baseline req/s',
    'Basalt req/s',
    'baseline CPU ms/req',
    'Basalt CPU ms/req',
    'CPU ratio (pairs)',
    'target',
  ],
];

for (const engine of ENGINES) {
  const db = await benchDb(engine);
  if (!db) continue;
  const procs: Subprocess[] = [];
  const scratch: string[] = [];
  try {
    const env = { ...db.env, BASALT_LOG_LEVEL: 'warn' };
    const served = { ...env, ...SERVER_ENV };
    // Schema, a key and the statements Basalt builds, made in process; then closed.
    const p = await openBasalt({ env, migrate: true });
    let key: string;
    let poolMax: number;
    const statements: Record<string, { sql: string; params: unknown[] }> = {};
    try {
      await p.db.exec(RELATIONS_SQL);
      key = await benchKey(p, ['db:query'], RELATIONS_TABLES);
      const snap = await p.services.database.catalog.refresh();
      for (const w of WORKLOADS) {
        const st = buildStatement(w.body, snap.tables.get(w.body.entity)!, { maxLimit: 1000 });
        statements[w.kind] = { sql: st.sql, params: st.params };
      }
      poolMax = p.settings.get('database.pool_max');
    } finally {
      await p.shutdown();
    }
    const baseData = baselineData(db, scratch);
    const luaDir = mkdtempSync(join(tmpdir(), 'basalt-bench-lua-'));
    scratch.push(luaDir);
    const { proc: base, url: baseUrl } = await startBaseline(procs, baseData, {
      BENCH_POOL_MAX: String(poolMax),
      BENCH_SELECT_SQL: 'SELECT 1',
      // Unused here (no /me workload); the baseline's verifier needs a key to start.
      BENCH_JWT_SECRET: 'bench-secret-'.padEnd(52, 'x'),
      BENCH_STATEMENTS: JSON.stringify(statements),
      ...SERVER_ENV,
    });
    const { proc: basalt, url: basaltUrl } = await startBasalt(procs, exe, db.dataDir, served);

    for (const w of WORKLOADS.filter((x) => KINDS.includes(x.kind))) {
      const script = join(luaDir, `${w.kind}.lua`);
      writeFileSync(script, queryLua(key, w.body));
      // The answers agree (rows and their count), once, before any figure.
      const ask = (url: string) =>
        fetch(url + '/api/v1/db/query', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': key },
          body: JSON.stringify(w.body),
        }).then((r) => r.json() as Promise<{ data: { count: number } }>);
      const [a, b] = [await ask(baseUrl), await ask(basaltUrl)];
      if (a.data.count !== b.data.count) throw new Error(`${w.name}: the baseline and Basalt disagree`);
      await wrkShort(wrkBin, baseUrl, script, CONNECTIONS, WARMUP);
      await wrkShort(wrkBin, basaltUrl, script, CONNECTIONS, WARMUP);
      const pairs: [Cell, Cell][] = [];
      for (let i = 0; i < REPEATS; i++) {
        const run = (url: string, pid: number) => wrk(wrkBin, url, script, CONNECTIONS, 2, pid, SECONDS);
        if (i % 2 === 0) {
          const x = await run(baseUrl, base.pid);
          pairs.push([x, await run(basaltUrl, basalt.pid)]);
        } else {
          const y = await run(basaltUrl, basalt.pid);
          pairs.push([await run(baseUrl, base.pid), y]);
        }
      }
      const ratios = pairs.map(([x, y]) => x.cpuPer1000 / y.cpuPer1000);
      const errors = pairs.reduce((n, [x, y]) => n + x.errors + y.errors, 0);
      table.push([
        engine,
        w.name + (errors ? ` (${errors} errors)` : ''),
        fmt(median(pairs.map(([x]) => x.rps))),
        fmt(median(pairs.map(([, y]) => y.rps))),
        median(pairs.map(([x]) => x.cpuPer1000)).toFixed(2),
        median(pairs.map(([, y]) => y.cpuPer1000)).toFixed(2),
        `${median(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(', ')})`,
        w.kind === 'expand' ? (median(ratios) >= 0.7 ? '≥ 0.7 met' : '≥ 0.7 NOT met') : '—',
      ]);
    }
  } finally {
    for (const proc of procs) {
      proc.kill('SIGTERM');
      await proc.exited;
    }
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
    await db.drop();
  }
}

printTable(
  table,
  `\nrelations and aggregates, ${CONNECTIONS} connections, ${SECONDS} s × ${REPEATS} pairs per cell after ${WARMUP} s of warm-up` +
    (Object.keys(SERVER_ENV).length ? `; both servers with ${JSON.stringify(SERVER_ENV)}` : ''),
);
console.log('\nOn a machine shared with other work the figures are noisy: compare the ratios of one run, not runs.');
