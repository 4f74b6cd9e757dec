/**
 * The request log's size (docs/logs.md): ROWS synthetic rows (BENCH_ROWS, default 100,000) written
 * as the writer writes them (src/modules/logs/writer.ts: batches of 500, each one insert),
 * then `pg_total_relation_size('basalt.request_log')` (table, TOAST and both indexes), per row and
 * extrapolated to a million requests; with this process's CPU time per row written (on the
 * embedded engine that includes the engine's own work; on external PostgreSQL only the client's)
 * and the wall time per batch (one commit each: on a slow disk the sync dominates). A mix like a
 * busy site's: most requests Database API selects, a user or a key on most, 3 % errors, 0.5 %
 * server errors with a stack.
 *
 *   npm run bench:log-size                       # both engines
 *   BENCH_ENGINES=embedded BENCH_ROWS=20000 npm run bench:log-size
 */
import { openBasalt } from '../src/services';
import { BATCH_ROWS, insertRows, type Pending } from '../src/modules/logs/writer';
import { benchDb, printTable } from './support';

const ROWS = Number(process.env.BENCH_ROWS ?? 100_000);
const ENGINES = (process.env.BENCH_ENGINES ?? 'embedded,external').split(',') as ('external' | 'embedded')[];

const PATHS = [
  ['POST', '/api/v1/db/query', 'db'],
  ['POST', '/api/v1/db/query', 'db'],
  ['POST', '/api/v1/db/query', 'db'],
  ['GET', '/api/v1/auth/me', 'auth'],
  ['POST', '/api/v1/auth/refresh', 'auth'],
  ['GET', '/api/v1/realtime/stream', 'realtime'],
  ['POST', '/api/v1/mail/send', 'mail'],
  ['GET', '/api/v1/files/4b1c6f0e-2f0b-4c52-9a1e-3f7f5d4f9a11', 'files'],
] as const;
const STACK = `error: ledger row 13 is broken
    at ErrorResponse (/$bunfs/root/basalt:1:234567)
    at handle (/$bunfs/root/basalt:1:345678)
    at batch (/$bunfs/root/basalt:1:456789)
    at execute (/$bunfs/root/basalt:1:567890)
    at query (/$bunfs/root/basalt:1:678901)`;

function synthetic(i: number, users: string[], keys: string[]): Pending {
  const [method, path, area] = PATHS[i % PATHS.length]!;
  const r = (i * 2654435761) % 1000;
  const status = r < 5 ? 500 : r < 30 ? [400, 401, 403, 404][r % 4]! : 200;
  return {
    at: Date.now() - (ROWS - i) * 10,
    requestId: crypto.randomUUID(),
    method,
    url: r % 7 === 0 ? `http://h${path}?tables=notes&access_token=abc` : `http://h${path}`,
    path,
    status,
    ms: 0.5 + (r % 50) / 3,
    area,
    keyId: r % 3 === 0 ? keys[r % keys.length]! : null,
    userId: r % 3 !== 0 ? users[r % users.length]! : null,
    ip: `203.0.${r % 256}.${i % 256}`,
    failure:
      status === 500
        ? {
            code: 'internal_error',
            message: 'Internal error.',
            cause: { name: 'error', message: 'ledger row 13 is broken', stack: STACK },
          }
        : status >= 400
          ? { code: 'unauthorized', message: 'The API key is invalid, revoked or expired.' }
          : null,
    weight: 1,
  };
}

const table: string[][] = [
  ['engine', 'rows', 'total size', 'bytes per row', 'per million requests', 'CPU per row', 'wall per batch of 500'],
];
for (const engine of ENGINES) {
  const db = await benchDb(engine);
  if (!db) continue;
  const p = await openBasalt({ env: { ...db.env, BASALT_LOG_LEVEL: 'warn' }, migrate: true });
  try {
    const users = Array.from({ length: 200 }, () => crypto.randomUUID());
    const keys = Array.from({ length: 5 }, () => crypto.randomUUID());
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < ROWS; i += BATCH_ROWS) {
      const batch: Pending[] = [];
      for (let j = i; j < Math.min(ROWS, i + BATCH_ROWS); j++) batch.push(synthetic(j, users, keys));
      await insertRows(p.db, batch);
    }
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    await p.db.exec('VACUUM ANALYZE basalt.request_log');
    const { rows } = await p.db.query<{ total: string; n: string }>(
      `SELECT pg_total_relation_size('basalt.request_log')::text AS total, (SELECT count(*) FROM basalt.request_log)::text AS n`,
    );
    const total = Number(rows[0]!.total);
    const n = Number(rows[0]!.n);
    table.push([
      engine,
      n.toLocaleString('en-US'),
      `${(total / 2 ** 20).toFixed(1)} MiB`,
      (total / n).toFixed(0),
      `${(((total / n) * 1e6) / 2 ** 20).toFixed(0)} MiB`,
      `${((cpu.user + cpu.system) / n).toFixed(1)} µs`,
      `${((ms * BATCH_ROWS) / n).toFixed(1)} ms`,
    ]);
  } finally {
    await p.shutdown();
    await db.drop();
  }
}
printTable(table, `The request log's size after ${ROWS.toLocaleString('en-US')} synthetic requests`);
