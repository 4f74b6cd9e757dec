/**
 * Request counters and latency per listener, exposed at `/metrics` (main listener) in the
 * Prometheus text format. Cheap: a few map updates per request, no labels from user input
 * (requests are counted by area of the route list in src/app.ts, not by path).
 */
const BUCKETS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];

interface Histogram {
  buckets: number[];
  sum: number;
  count: number;
}

/** One answer of `ms` into a histogram (cumulative buckets, as Prometheus reads them). */
function count(h: Histogram, ms: number): void {
  for (let i = 0; i < BUCKETS.length; i++) if (ms <= BUCKETS[i]!) h.buckets[i]!++;
  h.sum += ms;
  h.count++;
}

export class Metrics {
  /** Label text → counter; the counter object is also reachable from `counters` without building the text. */
  private requests = new Map<string, { n: number }>();
  /** area → method → status → counter (the per-request path allocates nothing once a combination was seen). */
  private counters = new Map<string, Map<string, Map<number, { n: number }>>>();
  private histogram = new Map<string, Histogram>();
  private readonly started = Date.now();

  /** One answered request; `area` is the name of its area in the route list (src/app.ts), `other` outside every area. */
  observe(area: string, method: string, status: number, ms: number): void {
    const m = method.length <= 7 ? method : 'OTHER';
    let byMethod = this.counters.get(area);
    if (!byMethod) this.counters.set(area, (byMethod = new Map()));
    let byStatus = byMethod.get(m);
    if (!byStatus) byMethod.set(m, (byStatus = new Map()));
    let counter = byStatus.get(status);
    if (!counter) {
      counter = { n: 0 };
      byStatus.set(status, counter);
      this.requests.set(`area="${area}",method="${m}",status="${status}"`, counter);
    }
    counter.n++;
    let h = this.histogram.get(area);
    if (!h) this.histogram.set(area, (h = { buckets: BUCKETS.map(() => 0), sum: 0, count: 0 }));
    count(h, ms);
  }

  /** `extra`: gauges beside the process's; `more`: an area's own gauges and counters (realtime). */
  render(
    extra: Record<string, number> = {},
    more: { gauges?: Record<string, number>; counters?: Record<string, number> } = {},
  ): string {
    const out: string[] = [
      '# HELP basalt_http_requests_total HTTP requests answered, by area, method and status.',
      '# TYPE basalt_http_requests_total counter',
    ];
    for (const [k, v] of this.requests) out.push(`basalt_http_requests_total{${k}} ${v.n}`);
    out.push(
      '# HELP basalt_http_request_duration_ms Time to answer, by area.',
      '# TYPE basalt_http_request_duration_ms histogram',
    );
    for (const [area, h] of this.histogram) {
      BUCKETS.forEach((b, i) => {
        out.push(`basalt_http_request_duration_ms_bucket{area="${area}",le="${b}"} ${h.buckets[i]}`);
      });
      out.push(`basalt_http_request_duration_ms_bucket{area="${area}",le="+Inf"} ${h.count}`);
      out.push(`basalt_http_request_duration_ms_sum{area="${area}"} ${h.sum.toFixed(3)}`);
      out.push(`basalt_http_request_duration_ms_count{area="${area}"} ${h.count}`);
    }
    const mem = process.memoryUsage();
    const gauges: Record<string, number> = {
      basalt_process_uptime_seconds: (Date.now() - this.started) / 1000,
      basalt_process_resident_memory_bytes: mem.rss,
      basalt_process_heap_used_bytes: mem.heapUsed,
      ...extra,
      ...more.gauges,
    };
    for (const [name, v] of Object.entries(gauges)) out.push(`# TYPE ${name} gauge`, `${name} ${v}`);
    for (const [name, v] of Object.entries(more.counters ?? {})) out.push(`# TYPE ${name} counter`, `${name} ${v}`);
    return out.join('\n') + '\n';
  }
}

const registries = new WeakMap<object, Metrics>();

/** The registry of one running platform (both of its listeners count into it). */
export function metricsFor(owner: object): Metrics {
  let m = registries.get(owner);
  if (!m) registries.set(owner, (m = new Metrics()));
  return m;
}
