/**
 * database.embedded_sync on the compiled executable, counted by the kernel: `strace`
 * attached to the serving process records its writes and syncs while 40 acknowledged inserts
 * go through the Database API at once (docs/operations.md, "Durability").
 *   full   — group commit: for each insert, the WAL write that holds it, then a sync of that
 *            WAL segment started after it, then the answer; fewer syncs than commits;
 *   normal — far fewer (one per flush window for all the commits in it), but some;
 *   off    — none.
 */
import { describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { serveBinary } from '../helpers/binary';
import { dbQuery, preparedInstance } from './support';
import { type Call, hasStrace, isSync, isWalSegment, parseTrace, straceArgs } from './trace';

const INSERTS = 40;

/** The server's writes and syncs (strace attached to `pid`) while `work` runs. */
async function traced(pid: number, dir: string, work: () => Promise<void>): Promise<Call[]> {
  const out = join(dir, 'strace.txt');
  const tracer = Bun.spawn([...straceArgs(out), '-p', String(pid)], { stderr: 'pipe' });
  // strace writes nothing until a call is traced: give it time to attach to every thread.
  await Bun.sleep(1000);
  await work();
  await Bun.sleep(500); // `normal`: the flush window after the last commit
  tracer.kill('SIGINT');
  await tracer.exited;
  return parseTrace(out);
}

/** Two copies of a marker, so one stays whole in the WAL whatever page boundary the row straddles. */
const bodyOf = (marker: string) => `${marker}.${marker}`;

async function insertsUnder(sync: 'full' | 'normal' | 'off') {
  const { dir, exe, key } = await preparedInstance();
  const server = await serveBinary(exe, dir, { BASALT_LOG_LEVEL: 'warn', BASALT_DATABASE_EMBEDDED_SYNC: sync });
  const run = crypto.randomUUID().slice(0, 8);
  const markers = Array.from({ length: INSERTS }, (_, i) => `gc${run}n${i}x`);
  try {
    const statuses: number[] = [];
    const calls = await traced(server.proc.pid, dir, async () => {
      // Concurrent, so that commits made while a sync runs share the next one.
      const answers = await Promise.all(
        markers.map((m) =>
          dbQuery(server.url, key, { action: 'insert', data: { body: bodyOf(m) }, fields: ['id', 'body'] }),
        ),
      );
      statuses.push(...answers.map((r) => r.status));
    });
    expect(statuses).toEqual(Array(INSERTS).fill(200));
    return { calls, markers };
  } finally {
    server.proc.kill('SIGTERM');
    expect(await server.proc.exited).toBe(0);
  }
}

const isWrite = (c: Call) => c.result > 0 && /^(pwrite64|pwritev2?|write|writev|sendto|sendmsg)$/.test(c.name);

describe.skipIf(!hasStrace)('embedded_sync: the writes and syncs the kernel sees', () => {
  test('full: each commit is written, then synced, then answered; commits share syncs', async () => {
    const { calls, markers } = await insertsUnder('full');
    const walSyncs = calls.filter((c) => isSync(c) && isWalSegment(c));
    const late: string[] = [];
    let first = Infinity;
    let last = 0;
    for (const m of markers) {
      // The first WAL write holding the row, and the answer that carries it back.
      const written = calls.find((c) => isWrite(c) && isWalSegment(c) && c.args.includes(m));
      const answered = calls.find((c) => isWrite(c) && !c.path?.includes('/basalt_data/') && c.args.includes(m));
      if (!written || !answered) throw new Error(`${m}: WAL write ${!!written}, answer ${!!answered} in the trace`);
      const covering = walSyncs.find(
        (s) => s.path === written.path && s.start >= written.end && s.end <= answered.start,
      );
      if (!covering) late.push(m);
      first = Math.min(first, written.end);
      last = Math.max(last, answered.start);
    }
    expect(late).toEqual([]);
    const during = walSyncs.filter((s) => s.start >= first && s.end <= last).length;
    expect(during).toBeGreaterThan(0);
    expect(during).toBeLessThan(INSERTS);
  }, 180_000);

  test('normal: some, far fewer than commits', async () => {
    const n = (await insertsUnder('normal')).calls.filter(isSync).length;
    expect(n).toBeGreaterThan(0);
    expect(n).toBeLessThan(INSERTS / 2);
  }, 180_000);

  test('off: none', async () => {
    expect((await insertsUnder('off')).calls.filter(isSync).length).toBe(0);
  }, 180_000);
});
