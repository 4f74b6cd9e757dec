/**
 * Database API cost, as ratios against a baseline measured in the same run:
 *  - select of 10 rows by an indexed filter through POST /api/v1/db/query, at 1, 16
 *    and 64 concurrent clients, against a minimal Bun.serve that parses the same JSON
 *    body and runs the same SQL text with the same parameters through the same driver
 *    (same pool options), with no key check, catalog, validation or value mapping;
 *  - transaction rounds (begin, 3 inserts, commit) over HTTP, against the same
 *    statements on a transaction opened in process.
 * External PostgreSQL (a fresh database on BASALT_BENCH_DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres, dropped afterwards) and the embedded
 * engine. Traffic goes to 127.0.0.1 only; every cell runs for a bounded time.
 *
 *   bun bench/db-query.ts              # BENCH_SECONDS=3 per cell by default
 *   BENCH_ENGINES=external BENCH_CLIENTS=16 BENCH_TX=0 bun bench/db-query.ts   # one cell, when profiling
 */
import { startServer, type TestServer } from '../test/helpers/server';
import { createKey } from '../test/helpers/keys';
import { openExternal } from '../src/db/external';
import type { Db } from '../src/db/engine';
import { buildStatement } from '../src/modules/database/query-builder';
import { benchDb, benchSelect, fmt, p99, printTable } from './support';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONCURRENCY = (process.env.BENCH_CLIENTS ?? '1,16,64').split(',').map(Number);
const ENGINES = (process.env.BENCH_ENGINES ?? 'external,embedded').split(',') as ('external' | 'embedded')[];
const TX = process.env.BENCH_TX !== '0';
const GROUPS = 1000;

/** Run `send` from `concurrency` workers for `seconds`; requests/s and p99 ms. */
async function load(seconds: number, concurrency: number, send: (i: number) => Promise<void>) {
  const times: number[] = [];
  const end = performance.now() + seconds * 1000;
  let n = 0;
  const worker = async () => {
    while (performance.now() < end) {
      const t0 = performance.now();
      await send(n++);
      times.push(performance.now() - t0);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { perSecond: times.length / ((performance.now() - start) / 1000), p99: p99(times) };
}

const SCHEMA = `
CREATE TABLE public.bench_items (id serial PRIMARY KEY, grp int4 NOT NULL, name text NOT NULL, price numeric(10,2), created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX bench_items_grp ON public.bench_items (grp);
INSERT INTO public.bench_items (grp, name, price) SELECT g % ${GROUPS}, 'item ' || g, (g % 100) + 0.99 FROM generate_series(1, ${GROUPS * 10}) g;
CREATE TABLE public.bench_log (id serial PRIMARY KEY, n int4 NOT NULL, note text);
ANALYZE public.bench_items;`;

const selectBody = (i: number) => benchSelect(i % GROUPS);

/** The minimal server: same body in, same SQL and parameters through the same driver, same envelope out. */
function baselineServer(db: Db, sql: string) {
  return Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const body = (await req.json()) as { filters: { value: number }[]; limit: number };
      const r = await db.query(sql, [String(body.filters[0]!.value), body.limit, 0]);
      return Response.json({ success: true, data: { rows: r.rows, count: r.rows.length } });
    },
  });
}

const table: string[][] = [
  ['engine', 'workload', 'clients', 'baseline req/s', 'baseline p99 ms', 'Basalt req/s', 'Basalt p99 ms', 'ratio'],
];

for (const engine of ENGINES) {
  const db = await benchDb(engine);
  if (!db) continue;
  let s: TestServer | undefined;
  let baseDb: Db | undefined;
  let baseline: ReturnType<typeof Bun.serve> | undefined;
  try {
    s = await startServer(engine, { db, env: { BASALT_DB_MAX_TRANSACTIONS_PER_KEY: '1000' } });
    await s.platform.db.exec(SCHEMA);
    const key = await createKey(s, {
      type: 'service',
      service: 'bench',
      permissions: ['db:query'],
      tables: ['bench_items', 'bench_log'],
    });
    const headers = { 'content-type': 'application/json', 'x-api-key': key };
    // The statement Basalt builds for this request, so both servers run identical SQL.
    const snap = await s.platform.services.database.catalog.refresh();
    const st = buildStatement(selectBody(0) as never, snap.tables.get('bench_items')!, { maxLimit: 1000 });
    baseDb =
      engine === 'external'
        ? await openExternal(db.url, {
            max: s.platform.settings.get('database.pool_max'),
            prepare: true,
            connection: { statement_timeout: String(s.platform.settings.get('db.statement_timeout_ms')) },
          })
        : s.platform.db;
    baseline = baselineServer(baseDb, st.sql);
    const post = async (url: string, body: unknown) => {
      const r = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
      const j = (await r.json()) as { data?: { count: number } };
      if (r.status !== 200 || j.data?.count !== 10)
        throw new Error(`unexpected answer ${r.status} ${JSON.stringify(j).slice(0, 200)}`);
    };
    const api = `${s.publicUrl}/api/v1/db/query`;
    const base = `${baseline.url.href}`;
    await load(1, 16, (i) => post(base, selectBody(i))); // warm-up: connections, prepared statements, JIT
    await load(1, 16, (i) => post(api, selectBody(i)));
    for (const c of CONCURRENCY) {
      const b = await load(SECONDS, c, (i) => post(base, selectBody(i)));
      const a = await load(SECONDS, c, (i) => post(api, selectBody(i)));
      table.push([
        engine,
        'select 10 rows by indexed filter',
        String(c),
        fmt(b.perSecond),
        b.p99.toFixed(1),
        fmt(a.perSecond),
        a.p99.toFixed(1),
        (a.perSecond / b.perSecond).toFixed(2),
      ]);
      console.error(table.at(-1)!.join(' | '));
    }

    // Transaction rounds: begin, 3 inserts, commit.
    const txc = !TX ? [] : engine === 'external' ? [1, 16] : [1];
    for (const c of txc) {
      const inproc = await load(SECONDS, c, async (i) => {
        const tx = await baseDb!.begin();
        for (let k = 0; k < 3; k++)
          await tx.query(
            'INSERT INTO public.bench_log (n, note) VALUES ($1::text::integer, $2::text::text) RETURNING id, n, note',
            [String(i), 'in process'],
          );
        await tx.commit();
      });
      const http = await load(SECONDS, c, async (i) => {
        const b = await fetch(`${s!.publicUrl}/api/v1/db/transaction/begin`, { method: 'POST', headers, body: '{}' });
        const id = ((await b.json()) as { data: { transaction_id: string } }).data.transaction_id;
        for (let k = 0; k < 3; k++) {
          const r = await fetch(api, {
            method: 'POST',
            headers,
            body: JSON.stringify({
              entity: 'bench_log',
              action: 'insert',
              data: { n: i, note: 'http' },
              transaction_id: id,
            }),
          });
          if (r.status !== 200) throw new Error(`insert ${r.status}`);
          await r.arrayBuffer();
        }
        const cm = await fetch(`${s!.publicUrl}/api/v1/db/transaction/${id}/commit`, {
          method: 'POST',
          headers,
          body: '{}',
        });
        if (cm.status !== 200) throw new Error(`commit ${cm.status}`);
        await cm.arrayBuffer();
      });
      table.push([
        engine,
        'transaction round (begin, 3 inserts, commit)',
        String(c),
        `${fmt(inproc.perSecond)} (in process)`,
        inproc.p99.toFixed(1),
        fmt(http.perSecond),
        http.p99.toFixed(1),
        (http.perSecond / inproc.perSecond).toFixed(2),
      ]);
      console.error(table.at(-1)!.join(' | '));
    }
  } finally {
    baseline?.stop(true);
    if (engine === 'external') await baseDb?.close();
    await s?.stop();
    await db.drop();
  }
}

printTable(table, `\nDatabase API (${SECONDS} s per cell, Bun ${Bun.version})\n`);
