/**
 * The embedded engine under a steady statement load, in one process, through the adapter Basalt
 * uses (src/db/embedded.ts): the select of bench:http (10 rows by an indexed filter of a
 * 10,000-row table), 16 in flight, for BENCH_SECONDS (default 60).
 *
 * Reported:
 *  - what one statement leaves on the heap: live ArrayBuffers and heap bytes (bun:jsc
 *    heapStats) after 2,000 statements, from a collected heap, per statement (an upper bound:
 *    a collection in between lowers it);
 *  - RSS idle (after a full collection), then sampled every second under the load: the largest
 *    and the last, and the largest minus idle (done when ≤ 100 MiB);
 *  - CPU per statement (process.cpuUsage, user + system) in each second: median, lowest, highest,
 *    and how many seconds were more than 1.5 × the median (the "slow phase" of a collector that
 *    lets garbage pile up: CPU per statement alternating between two levels).
 *
 *   npm run bench:embedded-load
 *   BENCH_SECONDS=20 npm run bench:embedded-load
 */
import { heapStats } from 'bun:jsc';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbedded } from '../src/db/embedded';
import { BENCH_ITEMS_SQL, median, rssMiB } from './support';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
const IN_FLIGHT = 16;
const SQL =
  'SELECT id, grp, name, price FROM public.bench_items WHERE grp = $1::text::integer ORDER BY id LIMIT $2 OFFSET $3';

const dir = mkdtempSync(join(tmpdir(), 'basalt-bench-embedded-'));
const db = await openEmbedded(join(dir, 'pg'), { sync: 'normal' });
try {
  await db.exec(BENCH_ITEMS_SQL);
  let n = 0;
  const one = async () => {
    const r = await db.query(SQL, [String(n++ % 1000), 10, 0]);
    if (r.rows.length !== 10) throw new Error(`expected 10 rows, got ${r.rows.length}`);
  };
  const batch = async (count: number) => {
    let left = count;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (left-- > 0) await one();
      }),
    );
  };
  await batch(2000); // warm-up: plans, JIT

  // What a statement leaves behind, from a collected heap.
  Bun.gc(true);
  const h0 = heapStats();
  await batch(2000);
  const h1 = heapStats();
  const buffers = ((h1.objectTypeCounts.ArrayBuffer ?? 0) - (h0.objectTypeCounts.ArrayBuffer ?? 0)) / 2000;
  const views = ((h1.objectTypeCounts.Uint8Array ?? 0) - (h0.objectTypeCounts.Uint8Array ?? 0)) / 2000;
  const heapKb = (h1.heapSize - h0.heapSize) / 2000 / 1024;
  const extraKb = (h1.extraMemorySize - h0.extraMemorySize) / 2000 / 1024;

  Bun.gc(true);
  await Bun.sleep(1000);
  const idle = rssMiB(process.pid);
  const perSecond: number[] = [];
  const rss: number[] = [];
  let statements = 0;
  const end = performance.now() + SECONDS * 1000;
  let lastCpu = process.cpuUsage();
  let lastCount = 0;
  let lastAt = performance.now();
  // Sampled between statements: the statements resolve in microtasks, so a timer would wait for the end.
  const sample = () => {
    const now = performance.now();
    if (now - lastAt < 1000) return;
    lastAt = now;
    const cpu = process.cpuUsage(lastCpu);
    lastCpu = process.cpuUsage();
    const done = statements - lastCount;
    lastCount = statements;
    if (done > 0) perSecond.push((cpu.user + cpu.system) / done);
    rss.push(rssMiB(process.pid));
  };
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        await one();
        statements++;
        sample();
      }
    }),
  );
  const mid = median(perSecond);
  const slow = perSecond.filter((x) => x > 1.5 * mid).length;
  const peak = Math.max(...rss);
  const r = (x: number) => Math.round(x);
  console.log(
    `per statement (2,000 from a collected heap): ${buffers.toFixed(1)} ArrayBuffers, ${views.toFixed(1)} Uint8Arrays, ${heapKb.toFixed(1)} KB heap, ${extraKb.toFixed(1)} KB extra memory`,
  );
  console.log(
    `${SECONDS} s, ${IN_FLIGHT} in flight: ${statements.toLocaleString('en-US')} statements (${r(statements / SECONDS)}/s)`,
  );
  console.log(
    `CPU µs per statement, per second: median ${mid.toFixed(0)}, lowest ${Math.min(...perSecond).toFixed(0)}, highest ${Math.max(...perSecond).toFixed(0)}; ${slow} of ${perSecond.length} seconds above 1.5 × the median`,
  );
  if (process.env.BENCH_VERBOSE) {
    console.log(`CPU µs per statement, each second: ${perSecond.map(r).join(' ')}`);
    console.log(`RSS each second: ${rss.map(r).join(' ')}`);
  }
  console.log(
    `RSS: idle ${r(idle)} MiB, largest under load ${r(peak)} MiB (+${r(peak - idle)}), last ${r(rss.at(-1) ?? 0)} MiB: ${peak - idle <= 100 ? 'within' : 'NOT within'} 100 MiB of idle`,
  );
} finally {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
}
