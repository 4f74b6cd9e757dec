/**
 * `serve`'s WAL archiving on the embedded engine (docs/backup.md, "Point-in-time restore"):
 * src/modules/backup/wal-archive.ts fed with the platform's settings, base backups and S3 target.
 */
import { join } from 'node:path';
import type { Basalt } from '../../services';
import { pitrBases } from './pitr';
import { backupS3Target, deleteArchive, uploadArchive } from './s3';
import { startWalArchiver } from './wal-archive';

/** Start archiving; returns the stop function (a last copy of what is flushed, before the engine closes). */
export async function startWalArchiving(p: Basalt): Promise<() => Promise<void>> {
  const wal = p.db.wal;
  if (!wal) return async () => {};
  const s3 = async () => {
    try {
      return await backupS3Target(p, p.services.extensions);
    } catch (e) {
      p.log.warn('WAL archive not copied to S3', { cause: e });
      return undefined;
    }
  };
  const archiver = await startWalArchiver({
    dataDir: p.dataDir,
    wal,
    db: p.db,
    flushSeconds: () => p.settings.get('backup.wal_flush_seconds'),
    pitrDays: () => p.settings.get('backup.pitr_days'),
    bases: async () =>
      (await pitrBases(join(p.dataDir, 'backups'))).map((b) => ({
        snapshotAt: new Date(b.manifest.wal.snapshot_at),
        start: b.manifest.wal.start,
      })),
    log: p.log,
    // Also to S3 (backup.s3_url, or the Files module's bucket), under wal/, checked like an archive.
    archived: async (path, name) => {
      const t = await s3();
      if (!t) return;
      try {
        await uploadArchive(t, path, `wal/${name}`);
      } catch (e) {
        p.log.warn('WAL archive not copied to S3', { name, bucket: t.bucket, cause: e });
      }
    },
    pruned: async (names) => {
      const t = await s3();
      if (!t) return;
      for (const name of names)
        await deleteArchive(t, `wal/${name}`).catch((e) =>
          p.log.warn('WAL archive copy not deleted from S3', { name, bucket: t.bucket, cause: e }),
        );
    },
  });
  return () => archiver.stop();
}
