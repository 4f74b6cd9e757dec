/**
 * What database.embedded_sync costs (docs/operations.md, "Durability"): the compiled
 * executable on the embedded engine under `off`, `normal` and `full`, each driven from
 * this process over HTTP with acknowledged Database API inserts (1 and 16 at a time) and
 * keyed mail acceptance (16 at a time, a fresh Idempotency-Key each). Prints req/s and p99
 * per cell and the ratio to `off`. `BENCH_SECONDS` per cell (default 5); the modes run in
 * turn, so read the ratios of one run on a machine otherwise quiet.
 */
import { serveBinary } from '../test/helpers/binary';
import { dbQuery, preparedInstance } from '../test/embedded/support';
import { fmt, timedLoad } from './support';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const MODES = ['off', 'normal', 'full'] as const;

const smtp = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
type Cell = { perSecond: number; p99: number };
const results: Record<string, Record<string, Cell>> = {};
try {
  for (const mode of MODES) {
    const { dir, exe, key } = await preparedInstance();
    const server = await serveBinary(
      exe,
      dir,
      {
        BASALT_LOG_LEVEL: 'warn',
        BASALT_DATABASE_EMBEDDED_SYNC: mode,
        BASALT_MAIL_SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
        BASALT_MAIL_FROM: 'bench@example.com',
      },
      120_000,
    );
    try {
      const insert = () => dbQuery(server.url, key, { action: 'insert', data: { body: 'bench' } });
      const mail = () =>
        fetch(server.url + '/api/v1/mail/send', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': key, 'idempotency-key': crypto.randomUUID() },
          body: JSON.stringify({ to: ['a@example.com'], subject: 's', text: 't' }),
        });
      await timedLoad(SECONDS, 4, insert, 200); // warm-up
      results[mode] = {
        'insert, 1 at a time': await timedLoad(SECONDS, 1, insert, 200),
        'insert, 16 at a time': await timedLoad(SECONDS, 16, insert, 200),
        'keyed mail, 16 at a time': await timedLoad(SECONDS, 16, mail, 202),
      };
    } finally {
      server.proc.kill('SIGTERM');
      await server.proc.exited;
    }
  }
} finally {
  smtp.stop(true);
}

const cells = Object.keys(results.off!);
console.log(`| workload | ${MODES.map((m) => `${m} req/s (p99 ms)`).join(' | ')} | full / off | normal / off |`);
console.log(`|---|${MODES.map(() => '---:').join('|')}|---:|---:|`);
for (const c of cells) {
  const row = MODES.map((m) => `${fmt(results[m]![c]!.perSecond)} (${results[m]![c]!.p99.toFixed(1)})`);
  const ratio = (m: string) => (results[m]![c]!.perSecond / results.off![c]!.perSecond).toFixed(2);
  console.log(`| ${c} | ${row.join(' | ')} | ${ratio('full')} | ${ratio('normal')} |`);
}
