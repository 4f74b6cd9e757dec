/**
 * API key verification cost, as ratios against a baseline measured in the same run:
 * the runtime-config route without a key (open mode) versus the same route behind
 * the access-mode gate with a cached key, and with the cache disabled (one database
 * lookup per request). Traffic goes to 127.0.0.1 only and is bounded in count.
 *
 *   bun bench/keys.ts                  # embedded engine
 *   BASALT_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun bench/keys.ts   # both engines
 */
import { ENGINES } from '../test/helpers/engines';
import { startServer, type TestServer } from '../test/helpers/server';
import { KeyService } from '../src/modules/keys/service';
import { fmt, median } from './support';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 3000);
const CONCURRENCY = 16;
const ROUNDS = 3;
const PATH = '/api/v1/public/runtime-config';

async function run(s: TestServer, headers: Record<string, string>, expect: number, count = REQUESTS): Promise<number> {
  const url = s.publicUrl + PATH;
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      const r = await fetch(url, { headers });
      await r.arrayBuffer();
      if (r.status !== expect) throw new Error(`unexpected status ${r.status}`);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return count / ((performance.now() - start) / 1000);
}

async function inProcess(svc: KeyService, key: string, n: number): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < n; i++) if (!(await svc.verify(key))) throw new Error('key refused');
  return n / ((performance.now() - start) / 1000);
}

const rows: string[][] = [];
for (const engine of ENGINES) {
  const s = await startServer(engine);
  try {
    const p = s.platform;
    const site = await p.services.keys.create({ type: 'public', site: true });
    const key = { 'x-api-key': site.key };
    await run(s, {}, 200); // warm-up
    // Interleaved rounds, median of each: the scenarios see the same machine conditions.
    const rounds: Record<string, number[]> = {
      baseline: [],
      openWithKey: [],
      requiredCached: [],
      requiredUncached: [],
    };
    const cached = p.services.keys;
    const uncached = new KeyService(p, { cacheTtlMs: 0 });
    for (let i = 0; i < ROUNDS; i++) {
      await p.settings.set('web.public_api_access_mode', 'open');
      rounds.baseline!.push(await run(s, {}, 200));
      rounds.openWithKey!.push(await run(s, key, 200));
      await p.settings.set('web.public_api_access_mode', 'api_key_required');
      rounds.requiredCached!.push(await run(s, key, 200));
      p.services.keys = uncached;
      rounds.requiredUncached!.push(await run(s, key, 200, Math.ceil(REQUESTS / 5)));
      p.services.keys = cached;
    }
    const [baseline, openWithKey, requiredCached, requiredUncached] = Object.values(rounds).map(median) as [
      number,
      number,
      number,
      number,
    ];
    const uncachedVerify = await inProcess(uncached, site.key, 1000);
    await uncached.close();
    const cachedVerify = await inProcess(cached, site.key, 200_000);
    rows.push([engine, 'HTTP open mode, no key (baseline)', fmt(baseline), '1.00']);
    rows.push([engine, 'HTTP open mode, valid key sent', fmt(openWithKey), (openWithKey / baseline).toFixed(2)]);
    rows.push([
      engine,
      'HTTP api_key_required, cached key',
      fmt(requiredCached),
      (requiredCached / baseline).toFixed(2),
    ]);
    rows.push([
      engine,
      'HTTP api_key_required, cache off',
      fmt(requiredUncached),
      (requiredUncached / baseline).toFixed(2),
    ]);
    rows.push([engine, 'verify() in process, cache off (baseline)', fmt(uncachedVerify), '1.00']);
    rows.push([engine, 'verify() in process, cached', fmt(cachedVerify), (cachedVerify / uncachedVerify).toFixed(1)]);
  } finally {
    await s.stop();
  }
}

const head = ['engine', 'scenario', 'ops/s', 'ratio'];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (r: string[]) => '| ' + r.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
console.log(
  `API key verification (median of ${ROUNDS} interleaved rounds; ${REQUESTS} requests per HTTP scenario, ${Math.ceil(REQUESTS / 5)} with the cache off; concurrency ${CONCURRENCY})`,
);
console.log(line(head));
console.log('|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
for (const r of rows) console.log(line(r));
