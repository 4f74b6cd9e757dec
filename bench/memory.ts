/**
 * Resident memory of the compiled executable on the embedded engine (docs/operations.md,
 * "Memory"): idle after start, the peak under a select load (16 at a time for
 * BENCH_SECONDS, default 20, on a table of 20,000 rows), and 5, 15 and 30 s after it.
 * RSS is read from /proc/<pid>/status (VmRSS), sampled every 250 ms during the load.
 * BENCH_SERVER_ENV (JSON) adds to the server's environment, e.g. '{"MIMALLOC_PURGE_DELAY":"100"}'
 * for Bun's own allocator delay instead of the one `serve` sets (docs/operations.md, "Memory and CPU").
 */
import { readFileSync } from 'node:fs';
import { serveBinary } from '../test/helpers/binary';
import { SERVER_ENV } from './support';
import { dbQuery, preparedInstance } from '../test/embedded/support';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const rss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const mib = (x: number) => `${Math.round(x)} MiB`;

const { dir, exe, key } = await preparedInstance();
const server = await serveBinary(exe, dir, { BASALT_LOG_LEVEL: 'warn', ...SERVER_ENV }, 120_000);
const pid = server.proc.pid;
try {
  for (let i = 0; i < 20; i++) {
    const rows = Array.from({ length: 1000 }, (_, j) => ({ body: `row ${i * 1000 + j} ${crypto.randomUUID()}` }));
    const r = await dbQuery(server.url, key, { action: 'insert', data: rows });
    if (r.status !== 200) throw new Error(`insert: ${r.status} ${await r.text()}`);
  }
  await Bun.sleep(5000);
  const idle = rss(pid);
  let peak = idle;
  const sampler = setInterval(() => (peak = Math.max(peak, rss(pid))), 250);
  const end = performance.now() + SECONDS * 1000;
  let requests = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (performance.now() < end) {
        const r = await dbQuery(server.url, key, {
          action: 'select',
          filters: [{ field: 'body', op: 'like', value: `row ${Math.floor(Math.random() * 20_000)}%` }],
          sort: [{ field: 'body', direction: 'desc' }],
          limit: 50,
        });
        if (r.status !== 200) throw new Error(`select: ${r.status} ${await r.text()}`);
        await r.arrayBuffer();
        requests++;
      }
    }),
  );
  clearInterval(sampler);
  const after: string[] = [];
  for (const wait of [5, 10, 15]) {
    await Bun.sleep(wait * 1000);
    after.push(mib(rss(pid)));
  }
  console.log(`idle ${mib(idle)}; peak under load ${mib(peak)} (${requests} selects in ${SECONDS} s, 16 at a time);`);
  console.log(`after the load: 5 s ${after[0]}, 15 s ${after[1]}, 30 s ${after[2]}`);
} finally {
  server.proc.kill('SIGTERM');
  await server.proc.exited;
}
