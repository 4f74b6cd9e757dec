/** Small pieces every benchmark shares: statistics, number formatting, a bounded load loop. */

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
