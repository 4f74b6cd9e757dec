/**
 * Admin data browser page cost (docs/admin.md "Data browser"): a page of 50 rows from a
 * 1,000,000-row table, filtered (`gte`) and sorted on an indexed column, through
 * `DataBrowser.select`, against the same SQL text with the same parameters run directly
 * on the same connection (the baseline). The browser's page also reads the table's
 * size estimate (cached for 5 s) and, since the table is over 100,000 rows, asks the
 * planner for the filtered estimate (EXPLAIN) instead of counting: that is most of the
 * difference. p50 and p99 over BENCH_RUNS runs (default 1000) after a warm-up; each run
 * picks another lower bound, so no two consecutive pages are the same.
 *
 * External PostgreSQL (a fresh database on BASALT_BENCH_DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres, dropped afterwards) and the embedded engine.
 *
 *   bun bench/admin-data.ts
 *   BENCH_ENGINES=external BENCH_RUNS=200 BENCH_ROWS=200000 bun bench/admin-data.ts   # quicker
 */
import { openBasalt, type Basalt } from '../src/services';
import { createDataBrowser, MAX_LIMIT, type Filter, type Sort } from '../src/modules/database/browser/browser';
import { pageBody } from '../src/modules/database/browser/sql';
import { buildStatement } from '../src/modules/database/query-builder';
import { benchDb, fmt, median, p99, printTable } from './support';

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 1000);
const WARMUP = 50;
const ENGINES = (process.env.BENCH_ENGINES ?? 'external,embedded').split(',') as ('external' | 'embedded')[];
const SCORES = 1_000_000;

const SCHEMA = `
CREATE TABLE public.bench_rows (id int4 PRIMARY KEY, score int4 NOT NULL, name text NOT NULL, amount numeric(10,2), created_at timestamptz NOT NULL, note text);
INSERT INTO public.bench_rows
  SELECT g, (g::int8 * 7919) % ${SCORES}, 'row ' || g, (g % 1000) / 10.0, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
         CASE WHEN g % 3 = 0 THEN NULL ELSE repeat('n', g % 40) END
    FROM generate_series(1, ${ROWS}) g;
CREATE INDEX bench_rows_score ON public.bench_rows (score);
ANALYZE public.bench_rows;`;

const query = (i: number): { filters: Filter[]; sort: Sort[]; limit: number } => ({
  filters: [{ field: 'score', op: 'gte', value: (i * 104_729) % (SCORES - 10_000) }],
  sort: [{ field: 'score', direction: 'asc' }],
  limit: 50,
});

async function timeRuns(n: number, run: (i: number) => Promise<void>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await run(i);
    times.push(performance.now() - t0);
  }
  return times;
}

const table: string[][] = [
  [
    'engine',
    'workload',
    'runs',
    'baseline p50 ms',
    'baseline p99 ms',
    'browser p50 ms',
    'browser p99 ms',
    'ratio p50',
    'ratio p99',
  ],
];

for (const engine of ENGINES) {
  const db = await benchDb(engine);
  if (!db) continue;
  let p: Basalt | undefined;
  try {
    p = await openBasalt({ env: { ...db.env, BASALT_LOG_LEVEL: 'silent' }, migrate: false });
    const t0 = performance.now();
    await p.db.exec(SCHEMA);
    console.error(
      `${engine}: ${fmt(ROWS)} rows filled and indexed in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const browser = createDataBrowser(p, p.services.database);
    const snap = await p.services.database.catalog.refresh();
    const t = snap.tables.get('bench_rows')!;
    // The statement the browser builds for this page, so both sides run identical SQL.
    const statement = (i: number) =>
      buildStatement(pageBody(t, { ...query(i), offset: 0 }), t, { maxLimit: MAX_LIMIT });
    const direct = async (i: number) => {
      const st = statement(i);
      const r = await p!.db.query(st.sql, st.params);
      if (r.rows.length !== 50) throw new Error(`baseline: ${r.rows.length} rows`);
    };
    const viaBrowser = async (i: number) => {
      const r = await browser.select('bench_rows', query(i));
      if (r.count !== 50 || r.total !== undefined) throw new Error(`browser: ${r.count} rows, total ${r.total}`);
    };
    await timeRuns(WARMUP, direct);
    await timeRuns(WARMUP, viaBrowser);
    const plan = await p.db.query<Record<string, string>>(`EXPLAIN ${statement(1).sql}`, statement(1).params);
    console.error(`${engine} plan:\n  ${plan.rows.map((r) => Object.values(r)[0]).join('\n  ')}`);
    // Interleave halves so drift (other load, caches) hits both sides alike.
    const base: number[] = [];
    const brow: number[] = [];
    for (let k = 0; k < 2; k++) {
      base.push(...(await timeRuns(RUNS / 2, (i) => direct(i + k * RUNS))));
      brow.push(...(await timeRuns(RUNS / 2, (i) => viaBrowser(i + k * RUNS))));
    }
    const sample = await browser.select('bench_rows', query(7));
    table.push([
      engine,
      `page of 50 of ${fmt(ROWS)} rows, score >= x order by score (estimated_total ${fmt(sample.estimated_total)})`,
      String(RUNS),
      median(base).toFixed(2),
      p99(base).toFixed(2),
      median(brow).toFixed(2),
      p99(brow).toFixed(2),
      (median(brow) / median(base)).toFixed(2),
      (p99(brow) / p99(base)).toFixed(2),
    ]);
    console.error(table.at(-1)!.join(' | '));
  } finally {
    await p?.shutdown();
    await db.drop();
  }
}

printTable(table, `\nAdmin data browser select (${RUNS} runs per cell, Bun ${Bun.version})\n`);
