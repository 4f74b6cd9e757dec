/**
 * Scheduled backups with retention by count (docs/backup.md): the schedule forms, their
 * validation, and a short interval keeping `backup.keep` scheduled archives while a
 * backup made by hand stays.
 */
import { describe, expect, test } from 'bun:test';
import { startServer } from '../helpers/server';
import { nextRun, parseSchedule, startBackupSchedule } from '../../src/modules/backup/schedule';
import { backupService } from '../../src/modules/backup/service';
import { ConfigError } from '../../src/config/validate';

describe('backup.schedule', () => {
  test('forms', () => {
    expect(parseSchedule('off')).toEqual({ kind: 'off' });
    expect(parseSchedule('')).toEqual({ kind: 'off' });
    expect(parseSchedule('every 6h')).toEqual({ kind: 'every', ms: 6 * 3_600_000 });
    expect(parseSchedule('every 30m')).toEqual({ kind: 'every', ms: 30 * 60_000 });
    expect(parseSchedule('every 2d')).toEqual({ kind: 'every', ms: 2 * 86_400_000 });
    expect(parseSchedule('daily 03:00')).toEqual({ kind: 'daily', hour: 3, minute: 0 });
    for (const bad of ['weekly', 'every 0h', 'every 6', 'every 6 h', 'daily 24:00', 'daily 3:00', '0 3 * * *']) {
      expect(() => parseSchedule(bad)).toThrow(
        /^backup.schedule: must be 'off', 'every N' with a unit s, m, h or d \(every 6h\), or 'daily HH:MM' in UTC/,
      );
    }
  });

  test('next run', () => {
    const start = new Date('2026-11-23T19:05:00Z');
    expect(nextRun({ kind: 'off' }, undefined, start)).toBeUndefined();
    expect(nextRun(parseSchedule('every 6h'), undefined, start)!.toISOString()).toBe('2026-11-24T01:05:00.000Z');
    expect(nextRun(parseSchedule('every 6h'), new Date('2026-11-23T10:00:00Z'), start)!.toISOString()).toBe(
      '2026-11-23T16:00:00.000Z',
    );
    expect(nextRun(parseSchedule('daily 03:00'), undefined, start)!.toISOString()).toBe('2026-11-24T03:00:00.000Z');
    expect(nextRun(parseSchedule('daily 23:30'), undefined, start)!.toISOString()).toBe('2026-11-23T23:30:00.000Z');
    expect(nextRun(parseSchedule('daily 03:00'), new Date('2026-11-23T03:00:01Z'), start)!.toISOString()).toBe(
      '2026-11-24T03:00:00.000Z',
    );
  });

  test('a bad value is refused where it is set, naming the forms', async () => {
    const s = await startServer('embedded');
    try {
      await expect(s.platform.settings.set('backup.schedule', 'weekly')).rejects.toThrow(ConfigError);
      await expect(s.platform.settings.set('backup.schedule', 'weekly')).rejects.toThrow(
        "backup.schedule must be 'off', 'every N' with a unit s, m, h or d (every 6h), or 'daily HH:MM' in UTC (daily 03:00), got \"weekly\"",
      );
      // More often than every 5 minutes: refused, naming why.
      for (const tooOften of ['every 1s', 'every 299s', 'every 4m'])
        await expect(s.platform.settings.set('backup.schedule', tooOften)).rejects.toThrow(
          `backup.schedule refused: '${tooOften}' is more often than every 5 minutes`,
        );
      await s.platform.settings.set('backup.schedule', 'every 300s');
      await s.platform.settings.set('backup.schedule', 'every 5m');
      await s.platform.settings.set('backup.schedule', 'daily 03:00');
    } finally {
      await s.stop();
    }
  });

  test('every 1s with backup.keep 2: scheduled archives are pruned to two, the one made by hand stays', async () => {
    // The setting refuses intervals under 5 minutes; the schedule itself runs any it is given.
    const s = await startServer('embedded', { env: { BASALT_BACKUP_KEEP: '2' } });
    const svc = backupService(s.platform);
    const manual = await svc.create();
    const stop = startBackupSchedule(s.platform, () => 'every 1s');
    const seen = new Set<string>();
    let most = 0;
    try {
      const started = Date.now();
      while (seen.size < 4 && Date.now() - started < 90_000) {
        const scheduled = (await svc.list()).filter((b) => b.trigger === 'schedule');
        for (const b of scheduled) seen.add(b.name);
        most = Math.max(most, scheduled.length);
        await Bun.sleep(200);
      }
    } finally {
      await stop();
    }
    expect(seen.size).toBeGreaterThanOrEqual(4);
    // Between a new archive and its prune there may briefly be keep + 1.
    expect(most).toBeLessThanOrEqual(3);
    const list = await svc.list();
    const scheduled = list.filter((b) => b.trigger === 'schedule');
    expect(scheduled.length).toBe(2);
    // The newest two survived (a backup under way when the schedule stopped finished first).
    for (const b of scheduled) seen.add(b.name);
    expect(scheduled.map((b) => b.name)).toEqual([...seen].sort().reverse().slice(0, 2));
    expect(list.map((b) => b.name)).toContain(manual.name);
    await s.stop();
  });
});
