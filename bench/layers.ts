/**
 * Where a Database API select spends Basalt's own time: the same request through fewer and
 * fewer of Basalt's layers, in one process, with and without the database
 * (docs/bench/2026-11-24-select-layer-by-layer.md). Not a throughput figure (bench:http is): CPU
 * microseconds per request, 16 requests in flight, each variant measured BENCH_REPEATS times in turn, medians.
 *
 *  - listener: the listener's fetch (src/http/server.ts) → Elysia → guards → route → service;
 *  - app: Elysia's handle, without the listener's wrapper;
 *  - app, key cached away: the same with the API key check answered at once;
 *  - app, service away: also the service answered at once (what remains is Elysia, the
 *    route's checks and the envelope);
 *  - service: the Database API service alone (plan, statement, query, decode);
 *  - bare: parse the JSON body, run the statement, Response.json (bench/baselines/bare.ts).
 * And `GET /api/v1/auth/me` (no database once the session is cached) through the listener, through
 * Elysia's handle, and bare: the same token checked by the same verifier, Response.json.
 * "memory" rows answer the statement from memory; "database" rows run it on PostgreSQL
 * through the same pool. The difference between the two is what the database path costs
 * under each layer. External PostgreSQL by default; BENCH_ENGINE=embedded runs the "database"
 * rows on the embedded engine, where each statement's WebAssembly work runs between the two
 * halves of every request (docs/bench/2026-11-25-where-the-time-goes-per-layer.md, "The embedded select's gap").
 *
 *   npm run bench:layers
 *   BENCH_ENGINE=embedded npm run bench:layers
 */
import { benchDb, benchKey, benchSelect, benchToken, BENCH_ITEMS_SQL, median, printTable } from './support';
import { createVerifier } from 'fast-jwt';
import { ACCESS_TOKEN_CHECKS } from '../src/modules/auth/jwt';
import { openBasalt } from '../src/services';
import { createApp } from '../src/app';
import { buildStatement } from '../src/modules/database/query-builder';
import type { Db, QueryResult } from '../src/db/engine';
import type { ApiKeyPrincipal } from '../src/http/api-key-guard';

const REPEATS = Number(process.env.BENCH_REPEATS ?? 7);
const COUNT = Number(process.env.BENCH_REQUESTS ?? 20_000);
const IN_FLIGHT = 16;

const db = await benchDb(process.env.BENCH_ENGINE === 'embedded' ? 'embedded' : 'external');
if (!db) process.exit(0);
const JWT_SECRET = `bench-secret-${'x'.repeat(40)}`;
const p = await openBasalt({
  env: { ...db.env, BASALT_LOG_LEVEL: 'warn', BASALT_AUTH_JWT_SECRET: JWT_SECRET },
  migrate: true,
});
try {
  await p.db.exec(BENCH_ITEMS_SQL);
  const key = await benchKey(p, ['db:query'], ['bench_items']);
  const token = await benchToken(p);
  const built = await createApp(p, {});
  const snap = await p.services.database.catalog.refresh();
  const query = benchSelect;
  const sql = buildStatement(query(0) as never, snap.tables.get('bench_items')!, { maxLimit: 1000 }).sql;

  // The seams: the service's connection, the key check and the service itself, swapped per variant.
  const database = p.services.database as unknown as { apiDb: () => Promise<Db>; query: unknown };
  const keys = p.services.keys as unknown as { verify: unknown };
  const realDb = await database.apiDb();
  const sample = (await realDb.query<Record<string, unknown>>(sql, ['7', 10, 0])).rows;
  const memoryDb = {
    ...realDb,
    query: async <T>() =>
      ({ rows: sample.map((r) => ({ ...r })), rowCount: 10, fields: [] }) as unknown as QueryResult<T>,
  } as Db;
  // The service runs a key's statement on waitAs(…) of its connection, or as a batch of one
  // (atOnce, external): those too answer from memory.
  memoryDb.waitAs = () => memoryDb;
  memoryDb.atOnce = async (statements) =>
    statements.map(() => ({ rows: sample.map((r) => ({ ...r })), rowCount: 10, fields: [] }));
  const principal = (await p.services.keys.verify(key)) as ApiKeyPrincipal;
  const seams = { db: database.apiDb, verify: keys.verify, query: database.query };
  const use = (on: { db: Db; keyAway?: boolean; serviceAway?: boolean }) => {
    database.apiDb = async () => on.db;
    keys.verify = on.keyAway ? async () => principal : seams.verify;
    database.query = on.serviceAway ? async () => ({ rows: sample.map((r) => ({ ...r })), count: 10 }) : seams.query;
  };

  let n = 0;
  const request = () => {
    const body = JSON.stringify(query(n++ % 1000));
    return new Request('http://127.0.0.1:8090/api/v1/db/query', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key, 'content-length': String(body.length) },
      body,
    });
  };
  const bare = (on: Db) => async () => {
    const body = (await request().json()) as { filters: { value: unknown }[]; limit: number };
    const r = await on.query(sql, [String(body.filters[0]!.value), body.limit, 0]);
    await Response.json({ success: true, data: { rows: r.rows, count: r.rows.length } }).text();
  };
  const through = (handle: (r: Request) => Promise<Response>) => async () => {
    const res = await handle(request());
    if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
    await res.text();
  };
  const listener = through(built.mainHandler);
  const app = through((r) => built.main.handle(r));
  const meRequest = () =>
    new Request('http://127.0.0.1:8090/api/v1/auth/me', { headers: { authorization: `Bearer ${token}` } });
  const throughMe = (handle: (r: Request) => Promise<Response>) => async () => {
    const res = await handle(meRequest());
    if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
    await res.text();
  };
  const verifyToken = createVerifier({ ...ACCESS_TOKEN_CHECKS, key: JWT_SECRET });
  const bareMe = async () => {
    const req = meRequest();
    const payload = verifyToken((req.headers.get('authorization') ?? '').slice(7)) as { sub: string };
    await Response.json({ success: true, data: { user: { id: payload.sub } } }).text();
  };

  const variants: [string, Parameters<typeof use>[0], () => Promise<unknown>][] = [];
  for (const [where, on] of [
    ['memory', memoryDb],
    ['database', realDb],
  ] as const) {
    variants.push(
      [`listener, ${where}`, { db: on }, listener],
      [`app, ${where}`, { db: on }, app],
      [`app, key cached away, ${where}`, { db: on, keyAway: true }, app],
      // With the service answered at once there is no statement to run: one row, not two.
      ...(where === 'memory'
        ? [['app, service away', { db: on, keyAway: true, serviceAway: true }, app] as (typeof variants)[number]]
        : []),
      [
        `service, ${where}`,
        { db: on },
        () => p.services.database.query({ kind: 'key', key: principal }, query(n++ % 1000) as never),
      ],
      [`bare, ${where}`, { db: on }, bare(on)],
    );
  }
  variants.push(
    ['GET /me: listener', { db: realDb }, throughMe(built.mainHandler)],
    ['GET /me: app', { db: realDb }, throughMe((r) => built.main.handle(r))],
    ['GET /me: bare', { db: realDb }, bareMe],
  );

  /** CPU µs per request (this process, all threads). */
  const measure = async (fn: () => Promise<unknown>, count: number) => {
    let left = count;
    const before = process.cpuUsage();
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (left-- > 0) await fn();
      }),
    );
    const used = process.cpuUsage(before);
    return (used.user + used.system) / count;
  };
  const results = new Map<string, number[]>();
  for (const [name, on, fn] of variants) {
    use(on);
    await measure(fn, COUNT / 4); // warm-up
    results.set(name, []);
  }
  for (let r = 0; r < REPEATS; r++)
    for (const [name, on, fn] of variants) {
      use(on);
      results.get(name)!.push(await measure(fn, COUNT));
    }
  use({ db: realDb });
  const rows = [['variant', 'CPU µs per request (median)', 'lowest–highest']];
  for (const [name, xs] of results)
    rows.push([name, median(xs).toFixed(1), `${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}`]);
  printTable(
    rows,
    `\nOne Database API select through Basalt's layers, in process (${db.env.BASALT_DATABASE_URL ? 'external' : 'embedded'}, ${IN_FLIGHT} in flight, ${REPEATS} × ${COUNT} requests; Bun ${Bun.version})\n`,
  );
} finally {
  await p.shutdown();
  await db.drop();
}
