/**
 * When the Files module stores uploads in S3, each backup is also copied to the bucket as
 * `basalt-backups/<name>` (docs/backup.md); an unreachable bucket does not fail the backup.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { S3Client } from 'bun';
import { startServer } from '../helpers/server';
import { startS3 } from '../extensions/support';
import { backupService } from '../../src/modules/backup/service';

describe('backup copy to the Files module S3 bucket', () => {
  test('copied byte for byte as basalt-backups/<name>', async () => {
    const s3 = await startS3();
    const s = await startServer('embedded', { env: s3.env });
    try {
      const b = await backupService(s.platform).create();
      expect(b.s3).toEqual({ bucket: 'basalt', key: `basalt-backups/${b.name}` });
      const client = new S3Client({
        bucket: 'basalt',
        endpoint: s3.env.BASALT_EXT_MEDIA_LIBRARY_S3_ENDPOINT,
        region: 'us-east-1',
        accessKeyId: 'S3RVER',
        secretAccessKey: 'S3RVER',
      });
      const copy = new Uint8Array(await client.file(`basalt-backups/${b.name}`).arrayBuffer());
      expect(Buffer.from(copy).equals(readFileSync(join(backupService(s.platform).dir, b.name)))).toBe(true);
    } finally {
      await s.stop();
      await s3.stop();
    }
  });

  test('an unreachable bucket: the local backup is complete, the failure is reported', async () => {
    const s = await startServer('embedded', {
      env: {
        BASALT_EXT_MEDIA_LIBRARY_S3_BUCKET: 'basalt',
        BASALT_EXT_MEDIA_LIBRARY_S3_ENDPOINT: 'http://127.0.0.1:9',
        BASALT_EXT_MEDIA_LIBRARY_S3_REGION: 'us-east-1',
        BASALT_EXT_MEDIA_LIBRARY_S3_ACCESS_KEY_ID: 'x',
        BASALT_EXT_MEDIA_LIBRARY_S3_SECRET_ACCESS_KEY: 'y',
      },
    });
    try {
      const b = await backupService(s.platform).create();
      expect(b.s3).toMatchObject({ bucket: 'basalt', key: null, error: expect.any(String) });
      expect((await backupService(s.platform).list()).map((x) => x.name)).toEqual([b.name]);
    } finally {
      await s.stop();
    }
  });

  test('without S3 settings nothing is uploaded', async () => {
    const s = await startServer('embedded');
    try {
      expect((await backupService(s.platform).create()).s3).toBeNull();
    } finally {
      await s.stop();
    }
  });
});
