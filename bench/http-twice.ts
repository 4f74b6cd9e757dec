/**
 * The agreement check of bench:http (docs/bench/http-method.md):
 * builds the executable once, runs the whole bench:http twice on it, one run after the other,
 * and sets the two results side by side (bench:http-compare): per cell both CPU ratios, their
 * difference, whether they agree within 0.05, and each run's verdict against the target. Both
 * results are kept as JSON (bench/results/http-twice-<time>-1.json and -2.json). Exits 1 when a
 * cell disagrees. About 100 minutes on the 2-core machine (two runs of 48–52 minutes with pairs of
 * 5 s, and the build: more where the pairs spread and cells take all 15).
 * Run it on a quiet machine: other work on the cores moves the figures.
 *
 *   npm run bench:http-twice
 *   BENCH_ENGINES=external npm run bench:http-twice        # any bench:http setting passes through
 */
import { join, resolve } from 'node:path';
import { loadavg } from 'node:os';
import { buildExecutable } from './support';

const ROOT = resolve(import.meta.dir, '..');
const started = performance.now();
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const exe = await buildExecutable(ROOT);
const runs = [1, 2].map((n) => join(ROOT, 'bench', 'results', `http-twice-${stamp}-${n}.json`));
console.log(`bench:http twice on ${exe}; load average ${loadavg()[0]!.toFixed(1)}`);
for (const [i, json] of runs.entries()) {
  console.log(`\n=== run ${i + 1} of 2 ===`);
  const run = Bun.spawn([process.execPath, join(import.meta.dir, 'http.ts')], {
    env: { ...process.env, BENCH_EXE: exe, BENCH_JSON: json },
    stdout: 'inherit',
    stderr: 'inherit',
  });
  if ((await run.exited) !== 0) {
    console.error(`run ${i + 1} failed`);
    process.exit(2);
  }
}
console.log('\n=== the two runs side by side ===');
const compare = Bun.spawn([process.execPath, join(import.meta.dir, 'http-compare.ts'), ...runs], {
  stdout: 'inherit',
  stderr: 'inherit',
});
const code = await compare.exited;
console.log(`\nbench:http-twice: ${((performance.now() - started) / 60_000).toFixed(1)} min in all.`);
process.exit(code);
