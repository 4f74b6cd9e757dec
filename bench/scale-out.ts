/**
 * What an added instance costs (docs/operations.md, "Scaling out"): 1, 2 and 3 `basalt serve`
 * processes of the compiled executable on one external database, directly and behind PgBouncer
 * in transaction mode (database.pooler = transaction, database.direct_url set), loaded for
 * BENCH_SECONDS by BENCH_CONNECTIONS workers of this process, each request to the next instance
 * in turn (round-robin), with a service key's select of 10 rows (bench:http's select cell).
 * Reported per cell: the total and per-instance requests a second, p99 latency, and the
 * instances' CPU per 1,000 requests (all of them together: the cost of coordination shows as a
 * rise with the count), and realtime's latency across instances (`realtimeLatency`). On 2 cores the instances share core 0 and this process runs on core 1
 * (bench/support.ts, PIN), so the total should stay flat as instances are added; what it loses
 * is the cost of one more (its pools, its listener, its share of NOTIFY fan-out).
 *
 *   npm run bench:scale-out
 *   BENCH_SECONDS=5 BENCH_INSTANCES=1,2 BENCH_POOLERS=pgbouncer npm run bench:scale-out
 */
import postgres from 'postgres';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { openBasalt } from '../src/services';
import { openSse } from '../test/realtime/sse';
import { PGBOUNCER_BIN, startPgBouncer, type PgBouncer } from '../test/helpers/pgbouncer';
import {
  ADMIN_URL,
  benchKey,
  BENCH_ITEMS_SQL,
  benchSelect,
  buildExecutable,
  cpuSeconds,
  externalDb,
  fmt,
  freePort,
  median,
  p99,
  PIN,
  pinToWrkCore,
  printTable,
  waitFor,
} from './support';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const INSTANCES = (process.env.BENCH_INSTANCES ?? '1,2,3').split(',').map(Number);
const POOLERS = (process.env.BENCH_POOLERS ?? (existsSync(PGBOUNCER_BIN) ? 'none,pgbouncer' : 'none')).split(',');
const POOL_MAX = process.env.BENCH_POOL_MAX ?? '8';

const root = resolve(import.meta.dir, '..');
const exe = await buildExecutable(root);
const db = await externalDb();
const procs: Subprocess[] = [];
let bouncer: PgBouncer | undefined;
const rows: string[][] = [
  ['url', 'instances', 'req/s', 'per instance', 'p99 ms', 'CPU ms / 1,000 req', 'errors', 'realtime p50 / p99 ms'],
];
const REALTIME_EVENTS = Number(process.env.BENCH_REALTIME_EVENTS ?? 100);

/**
 * Realtime latency across instances: a stream on the last instance, REALTIME_EVENTS inserts
 * through the first one at a time, each timed from its commit to its event's arrival (ms). The
 * commit is when this process, listening on the database itself (past any pooler), gets the
 * outbox's NOTIFY: so an insert made slower by the pooler does not count as delivery. Through
 * the pooler the instances' wake-up is a LISTEN on database.direct_url.
 */
async function realtimeLatency(urls: string[], key: string, dbUrl: string): Promise<number[]> {
  const listener = postgres(dbUrl, { max: 1, onnotice: () => {} });
  let committed = 0;
  await listener.listen('basalt_realtime', () => {
    committed = performance.now();
  });
  const stream = await openSse(`${urls[urls.length - 1]}/api/v1/realtime?tables=bench_items`, { 'x-api-key': key }, {});
  if (stream.status !== 200) throw new Error(`realtime stream refused: ${stream.status}`);
  const times: number[] = [];
  try {
    for (let i = 0; i < REALTIME_EVENTS; i++) {
      const name = `rt ${i} ${Math.random()}`;
      committed = 0;
      const r = await fetch(`${urls[0]}/api/v1/db/query`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify({ entity: 'bench_items', action: 'insert', data: { grp: 0, name } }),
      });
      if (r.status !== 200) throw new Error(`insert answered ${r.status}: ${await r.text()}`);
      while (!stream.of().some((e) => e.data?.row?.name === name) || !committed) await Bun.sleep(0.1);
      times.push(performance.now() - committed);
    }
  } finally {
    stream.close();
    await listener.end();
  }
  return times;
}
try {
  const p = await openBasalt({ env: db.env, migrate: true });
  let key: string;
  try {
    await p.db.exec(BENCH_ITEMS_SQL);
    await p.db.exec(`SELECT basalt.realtime_enable('bench_items')`);
    key = await benchKey(p, ['db:query'], ['bench_items']);
  } finally {
    await p.shutdown();
  }
  await pinToWrkCore([process.pid]);
  for (const pooler of POOLERS) {
    bouncer = pooler === 'pgbouncer' ? await startPgBouncer({ server: ADMIN_URL, poolSize: 20 }) : undefined;
    const env: Record<string, string> = {
      PATH: '/usr/bin:/bin',
      BASALT_LOG_LEVEL: 'warn',
      BASALT_DATABASE_POOL_MAX: POOL_MAX,
      BASALT_DATABASE_URL: bouncer ? bouncer.through(db.url) : db.url,
      ...(bouncer ? { BASALT_DATABASE_POOLER: 'transaction', BASALT_DATABASE_DIRECT_URL: db.url } : {}),
    };
    for (const n of INSTANCES) {
      const started: { url: string; pid: number; dir: string; proc: Subprocess }[] = [];
      for (let i = 0; i < n; i++) {
        const dir = mkdtempSync(join(tmpdir(), 'basalt-bench-scale-'));
        const port = await freePort();
        const proc = Bun.spawn([...PIN.server, exe, 'serve'], {
          env: { ...env, HOME: dir, BASALT_DATA_DIR: dir, BASALT_WEB_PORT: String(port) },
          cwd: dir,
          stdout: 'ignore',
          stderr: 'inherit',
        });
        procs.push(proc);
        const url = `http://127.0.0.1:${port}`;
        await waitFor(`${url}/readyz`, proc, `instance ${i + 1}`);
        started.push({ url, pid: proc.pid, dir, proc });
      }
      const send = (i: number) =>
        fetch(`${started[i % n]!.url}/api/v1/db/query`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': key },
          body: JSON.stringify(benchSelect(i % 1000)),
        });
      // Warm-up: connections, prepared statements, JIT.
      await Promise.all(Array.from({ length: CONNECTIONS }, (_, w) => send(w).then((r) => r.arrayBuffer())));
      const cpu0 = started.map((s) => cpuSeconds(s.pid));
      const counts = started.map(() => 0);
      const times: number[] = [];
      let errors = 0;
      let next = 0;
      const end = performance.now() + SECONDS * 1000;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          while (performance.now() < end) {
            const i = next++;
            const t = performance.now();
            const r = await send(i);
            await r.arrayBuffer();
            times.push(performance.now() - t);
            if (r.status === 200) counts[i % n]!++;
            else errors++;
          }
        }),
      );
      const elapsed = (performance.now() - t0) / 1000;
      const cpu = started.reduce((sum, s, i) => sum + cpuSeconds(s.pid) - cpu0[i]!, 0);
      const latency = await realtimeLatency(
        started.map((s) => s.url),
        key,
        db.url,
      );
      const total = counts.reduce((a, b) => a + b, 0);
      rows.push([
        pooler === 'pgbouncer' ? 'PgBouncer (transaction)' : 'PostgreSQL',
        String(n),
        fmt(total / elapsed),
        counts.map((c) => fmt(c / elapsed)).join(' / '),
        p99(times).toFixed(1),
        ((cpu / total) * 1e6).toFixed(0),
        String(errors),
        `${median(latency).toFixed(1)} / ${p99(latency).toFixed(1)}`,
      ]);
      for (const s of started) {
        s.proc.kill('SIGTERM');
        await s.proc.exited;
        rmSync(s.dir, { recursive: true, force: true });
      }
    }
    await bouncer?.stop();
    bouncer = undefined;
  }
  printTable(
    rows,
    `\nscale-out: ${CONNECTIONS} connections, ${SECONDS} s per cell, pool_max ${POOL_MAX}, instances on ${PIN.server.length ? 'core 0' : 'any core'}`,
  );
} finally {
  for (const proc of procs) if (proc.exitCode === null) proc.kill('SIGKILL');
  await bouncer?.stop();
  await db.drop();
}
