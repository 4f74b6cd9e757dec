/**
 * The bare baseline server of bench/http.ts, started as its own process so the load
 * generator (wrk), Basalt and this server never share an event loop. It answers the
 * same paths as Basalt with the least work that still does the job:
 *  - POST /api/v1/db/query: parse the JSON body, run the same SQL text Basalt runs with
 *    the same parameters through the same driver and pool size, answer {success, data};
 *    with `transaction_id`, run it on that reserved connection;
 *  - POST /api/v1/db/transaction/begin | /<id>/commit: reserve a connection and BEGIN, COMMIT;
 *  - GET /api/v1/auth/me: verify the same HS256 JWT with the same verifier (fast-jwt, the same
 *    checks as src/modules/auth/jwt.ts), no database;
 *  - POST /api/v1/mail/send: insert the same mail-job row (and its NOTIFY) in one statement;
 *  - POST /bench/rollback-all: between runs, roll back what wrk left open (and the begins still
 *    waiting behind it as they get the engine);
 *  - POST /api/v1/db/query with `expand`, or with action `aggregate` (bench/relations.ts): the
 *    one statement Basalt builds for that fixed body, with its parameters (BENCH_STATEMENTS:
 *    JSON {expand?, aggregate?: {sql, params}}), rows answered as the driver gives them.
 *
 * Environment: BENCH_PORT, BENCH_DB_URL (external) or BENCH_PG_DIR (embedded),
 * BENCH_POOL_MAX, BENCH_SELECT_SQL, BENCH_STATEMENTS, BENCH_JWT_SECRET. Prints `ready <port>`
 * when listening.
 */
import { createVerifier } from 'fast-jwt';
import { ACCESS_TOKEN_CHECKS } from '../../src/modules/auth/jwt';
import type { Db, Tx } from '../../src/db/engine';

const env = process.env;
// External: two pools as in Basalt, the Database API's with prepared statements (src/modules/database/api-pool.ts)
// and the platform's (mail) without. Embedded: the one in-process engine.
const external = env.BENCH_DB_URL ? (await import('../../src/db/external')).openExternal : undefined;
const max = Number(env.BENCH_POOL_MAX ?? 20);
// application_name: bench:http tells the baseline's PostgreSQL backends from Basalt's by it.
const connection = { application_name: 'bench-baseline' };
const db: Db = external
  ? await external(env.BENCH_DB_URL!, { max, connection })
  : await (await import('../../src/db/embedded')).openEmbedded(env.BENCH_PG_DIR!);
const apiDb: Db = external ? await external(env.BENCH_DB_URL!, { max, prepare: true, connection }) : db;
const selectSql = env.BENCH_SELECT_SQL!;
const fixed = JSON.parse(env.BENCH_STATEMENTS ?? '{}') as Record<string, { sql: string; params: unknown[] }>;
// Built once, as Basalt does (src/modules/auth/jwt.ts).
const verify = createVerifier({ ...ACCESS_TOKEN_CHECKS, key: env.BENCH_JWT_SECRET ?? '' });
const txs = new Map<string, Tx>();
/** Counts rollback-alls: a begin that waited through one is rolled back at once. */
let epoch = 0;

const json = (data: unknown, status = 200) => Response.json({ success: true, data }, { status });

const server = Bun.serve({
  port: Number(env.BENCH_PORT ?? 0),
  hostname: '127.0.0.1',
  reusePort: false,
  async fetch(req) {
    const path = new URL(req.url).pathname;
    if (path === '/api/v1/db/query') {
      const body = (await req.json()) as {
        action: string;
        filters?: { value: unknown }[];
        limit?: number;
        data?: { n: number; note: string };
        transaction_id?: string;
        expand?: unknown;
      };
      const one = body.expand !== undefined ? fixed.expand : body.action === 'aggregate' ? fixed.aggregate : undefined;
      if (one) {
        const r = await apiDb.query(one.sql, one.params);
        return json({ rows: r.rows, count: r.rows.length });
      }
      if (body.action === 'select') {
        const r = await apiDb.query(selectSql, [String(body.filters![0]!.value), body.limit ?? 100, 0]);
        return json({ rows: r.rows, count: r.rows.length });
      }
      const tx = txs.get(body.transaction_id!)!;
      const r = await tx.query(
        'INSERT INTO public.bench_log (n, note) VALUES ($1::text::integer, $2::text::text) RETURNING id, n, note',
        [String(body.data!.n), body.data!.note],
      );
      return json({ rows: r.rows, count: r.rows.length });
    }
    if (path === '/api/v1/db/transaction/begin') {
      const id = crypto.randomUUID();
      const at = epoch;
      const tx = await apiDb.begin();
      if (at !== epoch) {
        // Waited through a rollback-all: its client is gone (wrk stopped), so it must not hold the engine.
        await tx.rollback();
        return new Response('rolled back', { status: 503 });
      }
      txs.set(id, tx);
      return json({ transaction_id: id });
    }
    const commit = /^\/api\/v1\/db\/transaction\/([^/]+)\/commit$/.exec(path);
    if (commit) {
      const tx = txs.get(commit[1]!)!;
      txs.delete(commit[1]!);
      await tx.commit();
      return json({ transaction_id: commit[1], status: 'committed' });
    }
    if (path === '/bench/rollback-all') {
      // Between runs: wrk stops mid-round and leaves transactions open, and begins waiting
      // behind them (one transaction at a time on the embedded engine); those end as they arrive.
      epoch++;
      for (const tx of txs.values()) await tx.rollback().catch(() => {});
      txs.clear();
      return json({});
    }
    if (path === '/api/v1/auth/me') {
      const token = (req.headers.get('authorization') ?? '').slice(7);
      const payload = verify(token) as { sub: string };
      return json({ user: { id: payload.sub } });
    }
    if (path === '/api/v1/mail/send') {
      const body = (await req.json()) as { to: string[]; subject: string; text: string };
      const id = crypto.randomUUID();
      await db.query(
        `WITH job AS (INSERT INTO basalt.mail_jobs (id, key_id, state, sync, recipients, subject, text, message_id, max_attempts, attempts)
           VALUES ($1, NULL, 'queued', false, $2, $3, $4, $5, 8, 0) RETURNING id) SELECT pg_notify('basalt_bench', '') FROM job`,
        [id, body.to, body.subject, body.text, `<${id}@example.com>`],
      );
      return json({ job_id: id, sync: false, recipient_count: body.to.length }, 202);
    }
    return new Response('not found', { status: 404 });
  },
});
console.log(`ready ${server.port}`);
process.on('SIGTERM', async () => {
  server.stop(true);
  if (apiDb !== db) await apiDb.close();
  await db.close();
  process.exit(0);
});
