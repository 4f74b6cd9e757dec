/**
 * The WAL archive keeps every segment even when PostgreSQL recycles segments within one
 * statement (checkpoints in single-user mode run inline, between two of the archive's rounds):
 * the file layer hands each to the archive before it is removed or renamed for reuse
 * (src/modules/backup/wal-archive.ts, docs/backup.md "Point-in-time restore").
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type TestServer } from '../helpers/server';
import { backupService, readManifest } from '../../src/modules/backup/service';
import { checkWalChain } from '../../src/modules/backup/pitr';
import { listArchived, parseSegment, segmentName } from '../../src/modules/backup/wal-archive';
import { eventually } from '../helpers/wait';

describe('WAL archive', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer('embedded', { env: { BASALT_BACKUP_WAL_FLUSH_SECONDS: '1' } });
  });
  afterAll(async () => s?.stop());

  test('segments recycled inside one statement batch are archived first; the chain from the base is whole', async () => {
    const b = await backupService(s.platform).create();
    const wal = (await readManifest(join(s.platform.dataDir, 'backups', b.name)))!.wal!;
    expect(wal.start).toMatch(/^[0-9A-F]{24}$/);
    expect([wal.timeline, wal.segment_size]).toEqual([1, 16 << 20]);
    await s.platform.db.exec('CREATE TABLE public.churn (id int)');
    // One exchange: the archive's timer cannot run between these statements.
    const round = 'INSERT INTO public.churn VALUES (1); SELECT pg_switch_wal(); CHECKPOINT;';
    await s.platform.db.exec(round.repeat(8));
    const { rows } = await s.platform.db.query<{ f: string }>('SELECT pg_walfile_name(pg_current_wal_lsn()) AS f');
    const current = parseSegment(rows[0]!.f, wal.segment_size)!.segno;
    const first = parseSegment(wal.start, wal.segment_size)!.segno;
    const pgWal = join(s.platform.dataDir, 'pg', 'pg_wal');
    // PostgreSQL no longer has the first segments under their names: they were removed or recycled.
    expect(existsSync(join(pgWal, wal.start))).toBe(false);
    const walDir = join(s.platform.dataDir, 'backups', 'wal');
    await eventually(
      () => listArchived(walDir, wal.segment_size).some((f) => !f.partial && f.segment?.segno === current - 1) || false,
      { timeout: 10_000, what: 'the segment before the current one archived' },
    );
    const archived = new Set(
      listArchived(walDir, wal.segment_size)
        .filter((f) => !f.partial)
        .map((f) => f.segment?.segno),
    );
    for (let n = first; n < current; n++) expect(archived.has(n)).toBe(true);
    expect(() => checkWalChain(walDir, wal, 'latest')).not.toThrow();
    expect(readdirSync(walDir).filter((f) => /^[0-9A-F]{24}$/.test(f)).length).toBeGreaterThanOrEqual(current - first);
  }, 60_000);
});

describe("a serving process's early check of the archive (the admin API's restore request)", () => {
  const size = 16 << 20;
  const wal = {
    start: segmentName(1, 3, size),
    timeline: 1,
    segment_size: size,
    snapshot_at: new Date().toISOString(),
  };
  const dir = mkdtempSync(join(tmpdir(), 'basalt-wal-check-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('segments after the newest archived are still to come; a hole before it is named', () => {
    // Nothing archived from the base's start on yet: the archiver copies it, at the latest at the stop.
    expect(() => checkWalChain(dir, wal, 'latest', { serving: true })).not.toThrow();
    expect(() => checkWalChain(dir, wal, new Date(Date.now() - 1000), { serving: true })).not.toThrow();
    // The restore itself, after the stop, needs them.
    expect(() => checkWalChain(dir, wal, 'latest')).toThrow(`lacks segment ${wal.start}`);
    // A later segment archived and the base's own missing: a hole, named in both checks.
    writeFileSync(join(dir, segmentName(1, 4, size)), 'x');
    expect(() => checkWalChain(dir, wal, 'latest', { serving: true })).toThrow(`lacks segment ${wal.start}`);
  });
});
