/**
 * What database.embedded_sync costs (docs/operations.md, "Durability"): the compiled
 * executable on the embedded engine under `off`, `normal` and `full` (group commit), each
 * driven from this process over HTTP with acknowledged Database API inserts (1 and 16 at a
 * time) and keyed mail acceptance (16 at a time, a fresh Idempotency-Key each). Prints per
 * cell req/s, p50 and p99, the server's CPU per request (user + system, /proc/<pid>/stat),
 * and the ratio to `off`; before them, the disk's own sync latency: an 8 KiB write and
 * `fdatasync` of a file beside the data dirs, p50 and p99 of SYNC_SAMPLES. The three servers
 * run side by side; each cell is `BENCH_ROUNDS` rounds (default 5) that take the modes in
 * turn, `BENCH_SECONDS` per mode and cell in all (default 5): a cell is the median of its
 * rounds, a ratio the median of each round's ratio to the `off` round beside it (with their
 * range). Still, read the ratios of a machine otherwise quiet.
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveBinary } from '../test/helpers/binary';
import { dbQuery, preparedInstance } from '../test/embedded/support';
import { cpuSeconds, fmt, median, p99, timedLoad } from './support';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const MODES = ['off', 'normal', 'full'] as const;
type Mode = (typeof MODES)[number];
const SYNC_SAMPLES = 200;

/** The disk's sync latency in ms: an 8 KiB write then fdatasync, as a WAL flush does. */
function rawSync(): { p50: number; p99: number } {
  const dir = mkdtempSync(join(tmpdir(), 'basalt-sync-'));
  const fd = openSync(join(dir, 'probe'), 'w');
  const page = Buffer.alloc(8192, 1);
  const times: number[] = [];
  try {
    for (let i = 0; i < SYNC_SAMPLES; i++) {
      const t0 = performance.now();
      writeSync(fd, page, 0, page.length, (i % 64) * page.length);
      fdatasyncSync(fd);
      times.push(performance.now() - t0);
    }
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  return { p50: median(times), p99: p99(times) };
}

const disk = rawSync();
const smtp = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
type Server = Awaited<ReturnType<typeof serveBinary>> & { key: string };
type Round = { perSecond: number; p50: number; p99: number; count: number; cpu: number };
const CELLS = [
  { name: 'insert, 1 at a time', concurrency: 1, send: 'insert' },
  { name: 'insert, 16 at a time', concurrency: 16, send: 'insert' },
  { name: 'keyed mail, 16 at a time', concurrency: 16, send: 'mail' },
] as const;
const servers: Partial<Record<Mode, Server>> = {};
const rounds: Record<string, Record<Mode, Round[]>> = {};
try {
  // All three servers up at once; each cell runs in rounds that take the modes in turn, so a
  // change in the machine's speed falls on all of them alike.
  for (const mode of MODES) {
    const { dir, exe, key } = await preparedInstance();
    const s = await serveBinary(
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
    servers[mode] = { ...s, key };
  }
  const sender = (s: Server, kind: 'insert' | 'mail') =>
    kind === 'insert'
      ? () => dbQuery(s.url, s.key, { action: 'insert', data: { body: 'bench' } })
      : () =>
          fetch(s.url + '/api/v1/mail/send', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': s.key, 'idempotency-key': crypto.randomUUID() },
            body: JSON.stringify({ to: ['a@example.com'], subject: 's', text: 't' }),
          });
  for (const mode of MODES) await timedLoad(1, 4, sender(servers[mode]!, 'insert'), 200); // warm-up
  for (const cell of CELLS) {
    const byMode: Record<Mode, Round[]> = { off: [], normal: [], full: [] };
    rounds[cell.name] = byMode;
    for (let r = 0; r < ROUNDS; r++)
      for (const mode of MODES) {
        const s = servers[mode]!;
        const cpu0 = cpuSeconds(s.proc.pid);
        const x = await timedLoad(
          SECONDS / ROUNDS,
          cell.concurrency,
          sender(s, cell.send),
          cell.send === 'mail' ? 202 : 200,
        );
        byMode[mode].push({ ...x, cpu: cpuSeconds(s.proc.pid) - cpu0 });
      }
  }
} finally {
  for (const s of Object.values(servers)) {
    s.proc.kill('SIGTERM');
    await s.proc.exited;
  }
  smtp.stop(true);
}

console.log(`disk: 8 KiB write + fdatasync, p50 ${disk.p50.toFixed(2)} ms, p99 ${disk.p99.toFixed(2)} ms`);
console.log(
  `${ROUNDS} rounds of ${(SECONDS / ROUNDS).toFixed(1)} s per mode and cell, modes in turn; medians of rounds\n`,
);
console.log(
  `| workload | ${MODES.map((m) => `${m} req/s (p50 / p99 ms), CPU µs/req`).join(' | ')} | full / off | normal / off |`,
);
console.log(`|---|${MODES.map(() => '---:').join('|')}|---:|---:|`);
for (const cell of CELLS) {
  const byMode = rounds[cell.name]!;
  const row = MODES.map((m) => {
    const rs = byMode[m];
    const cpuUs = (rs.reduce((a, r) => a + r.cpu, 0) / rs.reduce((a, r) => a + r.count, 0)) * 1e6;
    return `${fmt(median(rs.map((r) => r.perSecond)))} (${median(rs.map((r) => r.p50)).toFixed(1)} / ${median(rs.map((r) => r.p99)).toFixed(1)}), ${fmt(cpuUs)}`;
  });
  // Each round's ratio to the `off` round beside it, then their median and range.
  const ratio = (m: Mode) => {
    const rs = byMode[m].map((r, i) => r.perSecond / byMode.off[i]!.perSecond);
    return `${median(rs).toFixed(2)} (${Math.min(...rs).toFixed(2)}–${Math.max(...rs).toFixed(2)})`;
  };
  console.log(`| ${cell.name} | ${row.join(' | ')} | ${ratio('full')} | ${ratio('normal')} |`);
}
