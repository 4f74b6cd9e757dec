/**
 * Two bench:http results (their JSON) side by side: per cell, the CPU ratio of each run with its
 * interquartile range, the difference, whether the runs agree within BENCH_AGREE (0.05), the
 * target with each run's verdict, each run's CPU per request of either side (when the runs
 * disagree, it tells whether the yardstick moved or Basalt did), the other work seen on the
 * server's core and the core's speed before the cell (a fixed piece of JavaScript's CPU ms: when it
 * differs between the runs, the machine did). Prints a markdown table (docs/bench/,
 * e.g. http-2026-11-27-0352.md), then the count of cells that agree and that each run met; exits 1 when a
 * cell disagrees.
 *
 *   bun bench/http-compare.ts bench/results/http-A.json bench/results/http-B.json
 */
import { readFileSync } from 'node:fs';
import { printTable } from './support';

interface Result {
  engine: string;
  workload: string;
  connections: number;
  target: number;
  cpuRatio: { median: number; q1: number; q3: number };
  met: boolean;
  baseline?: { cpuMsPerRequest: number | null };
  basalt?: { cpuMsPerRequest: number | null; otherMsPerSecond?: number | null };
  calibrationMs?: number;
}
interface Run {
  date: string;
  machine: string;
  minutes: number;
  loadAverage: { before: number; after: number };
  /** How the pairs were measured (bench/http.ts BENCH_MODE); runs before 2026-11-26 alternated. */
  mode?: string;
  passes?: number;
  results: Result[];
}

const AGREE = Number(process.env.BENCH_AGREE ?? 0.05);
const [a, b] = process.argv.slice(2).map((f) => JSON.parse(readFileSync(f, 'utf8')) as Run);
if (!a || !b) {
  console.error('usage: bun bench/http-compare.ts <run 1>.json <run 2>.json');
  process.exit(2);
}
/** A figure, or — where a run measured none (JSON writes NaN as null). */
const n = (v: number | null) => (v === null ? '—' : v.toFixed(2));
const key = (r: Result) => `${r.engine} ${r.workload} ${r.connections}`;
const second = new Map(b.results.map((r) => [key(r), r]));
const ratio = (r: Result) => `${n(r.cpuRatio.median)} (${n(r.cpuRatio.q1)}–${n(r.cpuRatio.q3)})`;
const verdict = (r: Result) => (r.met ? 'met' : `−${n(r.target - r.cpuRatio.median)}`);
const rows = [
  [
    'engine',
    'workload',
    'conns',
    'run 1',
    'run 2',
    'difference',
    `within ${AGREE}`,
    'target',
    'run 1 / run 2',
    'base ms/req 1 / 2',
    'Basalt ms/req 1 / 2',
    'others on server core ms/s 1 / 2',
    'core speed ms 1 / 2',
  ],
];
const others = (s?: { otherMsPerSecond?: number | null }) =>
  s?.otherMsPerSecond === undefined || s.otherMsPerSecond === null ? '—' : s.otherMsPerSecond.toFixed(0);
const msPer = (s?: { cpuMsPerRequest: number | null }) =>
  s?.cpuMsPerRequest === undefined || s.cpuMsPerRequest === null ? '—' : s.cpuMsPerRequest.toFixed(3);
let agree = 0;
let cells = 0;
for (const x of a.results) {
  const y = second.get(key(x));
  if (!y) continue;
  cells++;
  const d =
    x.cpuRatio.median === null || y.cpuRatio.median === null
      ? Number.NaN
      : Math.abs(x.cpuRatio.median - y.cpuRatio.median);
  if (d <= AGREE) agree++;
  rows.push([
    x.engine,
    x.workload,
    String(x.connections),
    ratio(x),
    ratio(y),
    Number.isNaN(d) ? '—' : d.toFixed(2),
    d <= AGREE ? 'yes' : 'no',
    `≥ ${x.target}`,
    `${verdict(x)} / ${verdict(y)}`,
    `${msPer(x.baseline)} / ${msPer(y.baseline)}`,
    `${msPer(x.basalt)} / ${msPer(y.basalt)}`,
    `${others(x.basalt)} / ${others(y.basalt)}`,
    `${x.calibrationMs?.toFixed(0) ?? '—'} / ${y.calibrationMs?.toFixed(0) ?? '—'}`,
  ]);
}
printTable(
  rows,
  `CPU ratio (baseline CPU per request / Basalt's), median of the pairs (IQR); pairs ${a.mode ?? 'alternate'} / ${b.mode ?? 'alternate'}, passes ${a.passes ?? 1} / ${b.passes ?? 1}. Run 1: ${a.date}, ${a.minutes.toFixed(1)} min, load ${a.loadAverage.before.toFixed(1)}→${a.loadAverage.after.toFixed(1)}; run 2: ${b.date}, ${b.minutes.toFixed(1)} min, load ${b.loadAverage.before.toFixed(1)}→${b.loadAverage.after.toFixed(1)}; ${a.machine}\n`,
);
const metIn = (r: Run) => r.results.filter((x) => x.met).length;
console.log(`\n${agree} of ${cells} cells agree within ${AGREE}.`);
console.log(`Targets met: run 1 ${metIn(a)} of ${a.results.length} cells, run 2 ${metIn(b)} of ${b.results.length}.`);
process.exit(agree === cells ? 0 : 1);
