/**
 * Backups in S3 (docs/backup.md): to `backup.s3_url`, or without it to the Files module's
 * bucket as `basalt-backups/<name>`; each copy checked by its SHA-256, deleted with the local
 * archive, and restored by `basalt restore s3://…`. An unreachable bucket does not fail the backup.
 */
import { describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3Client } from 'bun';
import { startServer } from '../helpers/server';
import { startS3 } from '../extensions/support';
import { backupService } from '../../src/modules/backup/service';
import { openEmbedded } from '../../src/db/embedded';
import { runCli } from '../helpers/cli';

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

describe('backup.s3_url: every backup uploaded, checked, pruned, and restored from the bucket', () => {
  test('upload with its SHA-256, delete with the local one, restore the newest or a named one, refuse a bad copy', async () => {
    const s3 = await startS3();
    const endpoint = s3.env.BASALT_EXT_MEDIA_LIBRARY_S3_ENDPOINT!;
    const url = `s3://S3RVER:S3RVER@basalt/site-a?endpoint=${encodeURIComponent(endpoint)}&region=us-east-1`;
    const s = await startServer('embedded', { env: { BASALT_BACKUP_S3_URL: url } });
    const scratch = mkdtempSync(join(tmpdir(), 'basalt-s3-restore-'));
    const bucket = s3rverBucket(endpoint);
    try {
      const svc = backupService(s.platform);
      await s.platform.db.exec('CREATE TABLE public.marker (x int); INSERT INTO public.marker VALUES (1)');
      const first = await svc.create();
      expect(first.s3).toEqual({ bucket: 'basalt', key: `site-a/${first.name}` });
      const local = readFileSync(join(svc.dir, first.name));
      const hash = new Bun.CryptoHasher('sha256').update(local).digest('hex');
      expect(Buffer.from(await bucket.file(`site-a/${first.name}`).arrayBuffer()).equals(local)).toBe(true);
      expect(await bucket.file(`site-a/${first.name}.sha256`).text()).toBe(`${hash}  ${first.name}\n`);

      await Bun.sleep(1100); // the next archive's name is a second later
      await s.platform.db.exec('INSERT INTO public.marker VALUES (2)');
      const second = await svc.create();
      await s.stop();

      // The newest under the prefix, with credentials from backup.s3_url (the URL alone names the bucket).
      const env = { BASALT_BACKUP_S3_URL: url };
      const newest = await runCli(['restore', 's3://basalt/site-a'], { ...env, BASALT_DATA_DIR: join(scratch, 'a') });
      expect(newest.stderr).toBe('');
      expect(newest.code).toBe(0);
      expect(newest.stdout).toContain(`downloaded s3://basalt/site-a/${second.name}; SHA-256 checked`);
      expect(await markers(join(scratch, 'a'))).toEqual([1, 2]);
      const named = await runCli(['restore', `s3://basalt/site-a/${first.name}`], {
        ...env,
        BASALT_DATA_DIR: join(scratch, 'b'),
      });
      expect(named.code).toBe(0);
      expect(await markers(join(scratch, 'b'))).toEqual([1]);
      expect(readdirSync(scratch).filter((n) => n.includes('s3-download'))).toEqual([]);

      // A copy whose bytes changed in the bucket is refused, naming it; nothing is written.
      await bucket.write(`site-a/${first.name}`, local.subarray(0, local.length - 10));
      const bad = await runCli(['restore', `s3://basalt/site-a/${first.name}`], {
        ...env,
        BASALT_DATA_DIR: join(scratch, 'c'),
      });
      expect(bad.code).toBe(1);
      expect(bad.stderr.trim()).toBe(
        `basalt restore: s3://basalt/site-a/${first.name} has SHA-256 ${new Bun.CryptoHasher('sha256').update(local.subarray(0, local.length - 10)).digest('hex')}; its .sha256 says ${hash}; nothing was changed`,
      );
      expect(readdirSync(scratch).sort()).toEqual(['a', 'b']);
      const none = await runCli(['restore', 's3://basalt/elsewhere'], { ...env, BASALT_DATA_DIR: join(scratch, 'c') });
      expect(none.stderr.trim()).toBe(
        'basalt restore: no backup archive under s3://basalt/elsewhere/; nothing was changed',
      );

      // Deleting a backup deletes its copy and hash.
      const again = await startServer('embedded', { env: { BASALT_BACKUP_S3_URL: url } });
      try {
        const third = await backupService(again.platform).create();
        expect(await bucket.exists(`site-a/${third.name}.sha256`)).toBe(true);
        await backupService(again.platform).delete(third.name);
        expect(await bucket.exists(`site-a/${third.name}`)).toBe(false);
        expect(await bucket.exists(`site-a/${third.name}.sha256`)).toBe(false);
      } finally {
        await again.stop();
      }
    } finally {
      await s.stop().catch(() => {}); // stopped above unless a check failed before
      await s3.stop();
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});

/** The marker rows of a restored data dir. */
async function markers(dataDir: string): Promise<number[]> {
  const db = await openEmbedded(join(dataDir, 'pg'));
  try {
    return (await db.query<{ x: number }>('SELECT x FROM public.marker ORDER BY x')).rows.map((r) => r.x);
  } finally {
    await db.close();
  }
}

describe('point-in-time restore from the bucket alone', () => {
  test('the WAL archive is uploaded beside the backups; restore --to on another machine holds the rows before it', async () => {
    const s3 = await startS3();
    const endpoint = s3.env.BASALT_EXT_MEDIA_LIBRARY_S3_ENDPOINT!;
    const url = `s3://S3RVER:S3RVER@basalt/site-p?endpoint=${encodeURIComponent(endpoint)}&region=us-east-1`;
    const s = await startServer('embedded', {
      env: { BASALT_BACKUP_S3_URL: url, BASALT_BACKUP_WAL_FLUSH_SECONDS: '1' },
    });
    const scratch = mkdtempSync(join(tmpdir(), 'basalt-s3-pitr-'));
    const bucket = s3rverBucket(endpoint);
    try {
      await s.platform.db.exec('CREATE TABLE public.marker (x int)');
      expect((await backupService(s.platform).create()).s3?.key).toBeTruthy();
      const times: { before: number; after: number }[] = [];
      for (let x = 1; x <= 6; x++) {
        const before = Date.now();
        await s.platform.db.query('INSERT INTO public.marker VALUES ($1)', [x]);
        times.push({ before, after: Date.now() });
        await Bun.sleep(300);
      }
      // serve's stop copies (and uploads) what is flushed last, before it closes the engine.
      await s.stop();
      const keys = ((await bucket.list({ prefix: 'site-p/wal/' })).contents ?? []).map((o) => o.key);
      expect(keys.some((k) => k.endsWith('.partial'))).toBe(true);
      expect(keys.some((k) => k.endsWith('.partial.sha256'))).toBe(true);
      const target = new Date(Math.floor((times[2]!.after + times[3]!.before) / 2));
      const r = await runCli(['restore', 's3://basalt/site-p', '--to', target.toISOString()], {
        BASALT_BACKUP_S3_URL: url,
        BASALT_DATA_DIR: join(scratch, 'elsewhere'),
      });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/downloaded \d+ WAL files from s3:\/\/basalt\/site-p\/wal\/; SHA-256 checked/);
      expect(await markers(join(scratch, 'elsewhere'))).toEqual([1, 2, 3]);
      expect(readdirSync(scratch).sort()).toEqual(['elsewhere']); // the downloads are gone
    } finally {
      await s.stop().catch(() => {});
      await s3.stop();
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 120_000);
});

/** The s3rver bucket the tests write to. */
function s3rverBucket(endpoint: string): S3Client {
  return new S3Client({
    bucket: 'basalt',
    endpoint,
    region: 'us-east-1',
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
  });
}
