/** Small pieces every benchmark shares: statistics, number formatting, a bounded load loop, a scratch database. */
import postgres from 'postgres';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDb, type FreshDb } from '../test/helpers/engines';

const ADMIN_URL = process.env.BASALT_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';


export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
export const p99 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]!;
export const fmt = (x: number): string => Math.round(x).toLocaleString('en-US');

/**
 * Send `count` requests from `concurrency` workers; every answer must have status `expect`.
 * Returns requests per second and the median latency in ms.
 */
export async function countedLoad(count: number, concurrency: number, send: () => Promise<Response>, expect: number) {
  let next = 0;
  const times: number[] = [];
  const worker = async () => {
    while (next < count) {
      next++;
      const t0 = performance.now();
      const r = await send();
      await r.arrayBuffer();
      times.push(performance.now() - t0);
      if (r.status !== expect) throw new Error(`unexpected status ${r.status}`);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { perSecond: count / ((performance.now() - start) / 1000), p50: median(times) };
}

/** A fresh database on BASALT_BENCH_DATABASE_URL (default: the local server), dropped by `drop()`. */
export async function externalDb(): Promise<FreshDb> {
  const name = `basalt_bench_${crypto.randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(ADMIN_URL);
  u.pathname = '/' + name;
  const dataDir = mkdtempSync(join(tmpdir(), 'basalt-bench-'));
  return {
    engine: 'external',
    env: { BASALT_DATA_DIR: dataDir, BASALT_DATABASE_URL: u.toString() },
    dataDir,
    url: u.toString(),
    drop: async () => {
      const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
      await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      await a.end();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A fresh database of `engine` for one bench run, or undefined (the reason printed) when none can be had. */
export async function benchDb(engine: 'external' | 'embedded'): Promise<FreshDb | undefined> {
  try {
    return engine === 'external' ? await externalDb() : await freshDb('embedded');
  } catch (e) {
    console.error(`skipping ${engine}: ${(e as Error).message}`);
    return undefined;
  }
}

/** Print `rows` (the first is the header) as a Markdown table, after `title` when given. */
export function printTable(rows: string[][], title?: string): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => '| ' + r.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
  if (title) console.log(title);
  console.log(line(rows[0]!));
  console.log('| ' + widths.map((w) => '-'.repeat(w)).join(' | ') + ' |');
  for (const r of rows.slice(1)) console.log(line(r));
}
