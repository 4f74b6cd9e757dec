/**
 * database.embedded_sync on the compiled executable, counted by the kernel: `strace`
 * attached to the serving process counts its fsync calls while acknowledged inserts go
 * through the Database API (docs/operations.md, "Durability").
 *   full   — at least one fsync per commit, done before the answer;
 *   normal — far fewer (one per flush window for all the commits in it), but some;
 *   off    — none.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { serveBinary } from '../helpers/binary';
import { dbQuery, preparedInstance } from './support';

const hasStrace = Bun.spawnSync(['strace', '-V']).exitCode === 0;
const INSERTS = 40;

/** fsync/fdatasync calls of the server while `work` runs. */
async function countSyncs(pid: number, dir: string, work: () => Promise<void>): Promise<number> {
  const out = join(dir, 'strace.txt');
  const tracer = Bun.spawn(['strace', '-f', '-qq', '-e', 'trace=fsync,fdatasync', '-o', out, '-p', String(pid)], {
    stderr: 'pipe',
  });
  // strace writes nothing until a call is traced: give it time to attach to every thread.
  await Bun.sleep(1000);
  await work();
  await Bun.sleep(500); // `normal`: the flush window after the last commit
  tracer.kill('SIGINT');
  await tracer.exited;
  return readFileSync(out, 'utf8')
    .split('\n')
    .filter((l) => /\b(fsync|fdatasync)\(/.test(l)).length;
}

async function insertsUnder(sync: 'full' | 'normal' | 'off') {
  const { dir, exe, key } = await preparedInstance();
  const server = await serveBinary(exe, dir, { BASALT_LOG_LEVEL: 'warn', BASALT_DATABASE_EMBEDDED_SYNC: sync });
  try {
    const statuses: number[] = [];
    const syncs = await countSyncs(server.proc.pid, dir, async () => {
      // Concurrent, so that `normal` groups them into few flush windows whatever the machine's speed.
      const answers = await Promise.all(
        Array.from({ length: INSERTS }, (_, i) =>
          dbQuery(server.url, key, { action: 'insert', data: { body: `n${i}` } }),
        ),
      );
      statuses.push(...answers.map((r) => r.status));
    });
    expect(statuses).toEqual(Array(INSERTS).fill(200));
    return syncs;
  } finally {
    server.proc.kill('SIGTERM');
    expect(await server.proc.exited).toBe(0);
  }
}

describe.skipIf(!hasStrace)('embedded_sync: the fsync calls the kernel sees', () => {
  test('full: at least one fsync per acknowledged commit', async () => {
    expect(await insertsUnder('full')).toBeGreaterThanOrEqual(INSERTS);
  }, 180_000);

  test('normal: some, far fewer than commits', async () => {
    const n = await insertsUnder('normal');
    expect(n).toBeGreaterThan(0);
    expect(n).toBeLessThan(INSERTS / 2);
  }, 180_000);

  test('off: none', async () => {
    expect(await insertsUnder('off')).toBe(0);
  }, 180_000);
});
