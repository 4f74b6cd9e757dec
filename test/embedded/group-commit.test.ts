/**
 * WalSyncs (src/db/group-commit.ts), the group commit of the embedded engine, on its own:
 * a wait resolves only after a sync that started after its mark, waits made while a sync runs
 * share the next one, a read-only mark waits for nothing, and a failed sync is final: waits are
 * refused, the owner hears of it once, every later sync fails. End to end on the executable:
 * test/embedded/durability.test.ts and test/embedded/crash.test.ts.
 */
import { describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WalSyncs } from '../../src/db/group-commit';

function segment(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'basalt-wal-')), '000000010000000000000001');
  writeFileSync(path, Buffer.alloc(8192));
  return path;
}

describe('WalSyncs', () => {
  test('nothing asked: a wait resolves at once, no sync runs', async () => {
    const wal = new WalSyncs(() => {});
    await wal.durable(wal.mark);
    expect(wal.stats).toEqual({ asked: 0, grouped: 0, inline: 0 });
  });

  test('waits made while syncs run share the next one', async () => {
    const wal = new WalSyncs(() => {});
    const path = segment();
    const settled: number[] = [];
    wal.defer(path);
    const first = wal.durable(wal.mark).then(() => settled.push(1));
    // Asked while the first sync runs in the thread pool: covered by the second.
    const later = Array.from({ length: 15 }, (_, i) => {
      wal.defer(path);
      return wal.durable(wal.mark).then(() => settled.push(i + 2));
    });
    expect(wal.pending).toBe(true);
    await Promise.all([first, ...later]);
    expect(settled.length).toBe(16);
    expect(wal.pending).toBe(false);
    expect(wal.stats.asked).toBe(16);
    // 16 commits, a sync for the first, another begun beside it, one for the rest.
    const grouped = wal.stats.grouped;
    expect(grouped).toBeLessThan(4);
    // A mark already covered waits for no new sync.
    await wal.durable(wal.mark);
    expect(wal.stats.grouped).toBe(grouped);
    wal.close();
  });

  test('syncNow covers what a running sync and later asks hold, in line', async () => {
    const wal = new WalSyncs(() => {});
    const path = segment();
    wal.defer(path);
    const waiting = wal.durable(wal.mark);
    wal.defer(path);
    wal.syncNow();
    expect(wal.pending).toBe(false);
    expect(wal.stats.inline).toBe(1);
    await waiting;
    wal.close();
  });

  test('a failed sync refuses the waits, is reported once and stays failed', async () => {
    const failures: Error[] = [];
    const wal = new WalSyncs((e) => failures.push(e));
    // fdatasync of /dev/null fails (EINVAL): a device that cannot be synced.
    wal.defer('/dev/null');
    const waits = await Promise.allSettled([wal.durable(wal.mark), wal.durable(wal.mark)]);
    expect(waits.map((w) => (w.status === 'rejected' ? String(w.reason) : 'resolved'))).toEqual([
      expect.stringMatching(/could not sync the WAL/),
      expect.stringMatching(/could not sync the WAL/),
    ]);
    expect(failures.length).toBe(1);
    expect(wal.failed).toBe(failures[0]!);
    expect(() => wal.syncNow()).toThrow(/could not sync the WAL/);
    expect(() => wal.defer(segment())).toThrow(/could not sync the WAL/);
    expect(failures.length).toBe(1);
  });
});
