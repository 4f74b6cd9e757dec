/**
 * Extensions' jobs and hooks (docs/extensions.md, "Jobs, cron and hooks"), with a bench
 * extension in a `basalt serve` process of its own (`bun src/main.ts serve`):
 *
 * - job throughput: JOBS jobs queued one by one (each its own statement) by a route, a handler
 *   that does nothing (concurrency 8), measured from the first job's creation to the last one's
 *   end, from the rows themselves (enqueue → handler → succeeded);
 * - hook latency: RATE rows a second written for SECONDS through a route (`ctx.db`, one
 *   transaction each), a hook on the table; latency from the row's insert time (taken in its
 *   transaction, just before the commit) to the handler's start, p50 / p99.
 *
 * No baseline beside it (docs/bench/README.md asks for one): the figures are absolute, so read
 * them only against another run on the same machine.
 *
 *   npm run bench:jobs                                              # embedded
 *   BENCH_JOBS=500 BENCH_SECONDS=5 bun bench/jobs.ts                 # a short sanity run
 *   BASALT_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:jobs   # both engines
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINES } from '../test/helpers/engines';
import { benchDb, fmt, freePort, printTable, waitFor } from './support';

const JOBS = Number(process.env.BENCH_JOBS ?? 5000);
const RATE = Number(process.env.BENCH_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 30);
const ROOT = join(import.meta.dir, '..');

const EXTENSION = `
import { defineExtension, t } from 'basalt';
const latencies = [];
export default defineExtension({
  name: 'jobs-bench',
  version: '1.0.0',
  setup(ctx) {
    ctx.jobs.define('noop', async () => {}, { concurrency: 8 });
    ctx.on('bench_rows', ['insert'], (event) => { latencies.push(Date.now() - Date.parse(event.row.at)); }, { name: 'latency' });
    ctx.routes.post('/enqueue', async ({ body, request }) => {
      for (let i = 0; i < body.n; i++) await ctx.jobs.enqueue('noop', { i });
      return ctx.reply(request, { ok: true });
    }, { body: t.Object({ n: t.Number() }) });
    ctx.routes.get('/jobs', async ({ request }) => {
      const { rows } = await ctx.db.query(
        "SELECT count(*) FILTER (WHERE state = 'succeeded')::int AS done, extract(epoch FROM max(finished_at) - min(created_at))::float8 AS seconds FROM basalt.jobs WHERE extension = 'jobs-bench'");
      return ctx.reply(request, rows[0]);
    });
    ctx.routes.post('/write', async ({ request }) => {
      await ctx.db.transaction((tx) => tx.query("INSERT INTO public.bench_rows (at) VALUES (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\\"T\\"HH24:MI:SS.MS\\"Z\\"'))"));
      return ctx.reply(request, { ok: true });
    });
    ctx.routes.get('/latencies', ({ request }) => {
      const s = [...latencies].sort((a, b) => a - b);
      const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
      return ctx.reply(request, { n: s.length, p50: at(0.5), p99: at(0.99) });
    });
  },
});
`;

async function run(engine: 'embedded' | 'external'): Promise<string[] | undefined> {
  const db = await benchDb(engine);
  if (!db) return undefined;
  const ext = join(db.dataDir, 'ext', 'jobs-bench');
  mkdirSync(ext, { recursive: true });
  writeFileSync(join(ext, 'index.ts'), EXTENSION);
  const migrations = join(db.dataDir, 'migrations');
  mkdirSync(migrations, { recursive: true });
  writeFileSync(
    join(migrations, '001_bench_rows.sql'),
    'CREATE TABLE public.bench_rows (id bigserial PRIMARY KEY, at text NOT NULL);',
  );
  const port = await freePort();
  const env = {
    ...process.env,
    ...db.env,
    BASALT_MIGRATIONS_DIR: migrations,
    BASALT_EXTENSIONS_DIR: join(db.dataDir, 'ext'),
    BASALT_WEB_PORT: String(port),
    BASALT_LOG_LEVEL: 'warn',
  };
  const server = Bun.spawn([process.execPath, join(ROOT, 'src/main.ts'), 'serve'], {
    env,
    cwd: db.dataDir,
    stdout: 'ignore',
    stderr: 'inherit',
  });
  const base = `http://127.0.0.1:${port}/api/module/jobs-bench`;
  const call = async (method: string, path: string, body?: unknown) =>
    (await (
      await fetch(base + path, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    ).json()) as any;
  try {
    await waitFor(`http://127.0.0.1:${port}/healthz`, server, 'basalt serve', 60_000);
    // Job throughput: 8 requests queue JOBS jobs together.
    await Promise.all(Array.from({ length: 8 }, () => call('POST', '/enqueue', { n: Math.ceil(JOBS / 8) })));
    const total = Math.ceil(JOBS / 8) * 8;
    let jobs: { done: number; seconds: number };
    for (;;) {
      jobs = (await call('GET', '/jobs')).data;
      if (jobs.done >= total) break;
      await Bun.sleep(200);
    }
    // Hook latency: RATE writes a second for SECONDS.
    const writes: Promise<unknown>[] = [];
    const start = performance.now();
    for (let k = 0; k < RATE * SECONDS; k++) {
      const due = start + (k * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      writes.push(call('POST', '/write'));
    }
    await Promise.all(writes);
    let lat: { n: number; p50: number; p99: number };
    for (;;) {
      lat = (await call('GET', '/latencies')).data;
      if (lat.n >= RATE * SECONDS) break;
      await Bun.sleep(200);
    }
    return [engine, fmt(total), fmt(total / jobs.seconds), fmt(RATE), `${lat.p50}`, `${lat.p99}`];
  } finally {
    server.kill('SIGTERM');
    await server.exited;
    await db.drop();
  }
}

const rows = [['engine', 'jobs', 'jobs/s (enqueue → succeeded)', 'writes/s', 'hook p50 ms', 'hook p99 ms']];
for (const engine of ENGINES) {
  const r = await run(engine);
  if (r) rows.push(r);
}
printTable(rows, "Extensions' jobs and hooks");
