/**
 * Online backup of the embedded engine while writes run, restore into a fresh data dir,
 * and the refusals: truncated, tampered and foreign archives (current data untouched),
 * a data dir held by a running process. docs/backup.md.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { startServer, type TestServer } from '../helpers/server';
import { freshDb } from '../helpers/engines';
import { createKey } from '../helpers/keys';
import { runCli } from '../helpers/cli';
import { fingerprint } from '../helpers/fingerprint';
import { backupService, readManifest, type CreatedBackup } from '../../src/modules/backup/service';
import { restore, RestoreError } from '../../src/modules/backup/restore';
import { openEmbedded } from '../../src/db/embedded';
import { eventually } from '../helpers/wait';

const PNG = new Uint8Array(
  Buffer.from(
    '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
      '1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082',
    'hex',
  ),
);

describe('backup while writing, then restore', () => {
  let s: TestServer;
  let backup: CreatedBackup;
  let committedBefore = 0;
  let fileId = '';
  const scratch = mkdtempSync(join(tmpdir(), 'basalt-backup-test-'));

  beforeAll(async () => {
    // The writers wait for the session while the backup holds it: on a loaded machine longer than the 2 s default.
    s = await startServer('embedded', { env: { BASALT_DATABASE_BUSY_TIMEOUT_MS: '60000' } });
    await s.platform.db.exec(
      'CREATE TABLE public.pairs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, pair int NOT NULL, side int NOT NULL, UNIQUE (pair, side))',
    );
    // An uploaded file (local storage), so the archive carries extension files too.
    const key = await createKey(s, { permissions: ['files:*'] });
    const form = new FormData();
    form.append('file', new Blob([PNG]), 'pixel.png');
    const up = await fetch(`${s.url}/api/v1/files`, { method: 'POST', body: form, headers: { 'x-api-key': key } });
    expect(up.status).toBe(201);
    fileId = (await up.json()).file.id;
  });
  afterAll(async () => {
    await s?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a backup taken while pairs of rows are written in transactions holds only whole pairs, at least every pair committed before it started', async () => {
    let stop = false;
    let committed = 0;
    // Writers: each transaction writes the two rows of one pair, with a pause between them.
    const writer = async (offset: number) => {
      for (let pair = offset; !stop; pair += 2) {
        await s.platform.db.transaction(async (tx) => {
          await tx.query('INSERT INTO public.pairs (pair, side) VALUES ($1, 1)', [pair]);
          await Bun.sleep(1);
          await tx.query('INSERT INTO public.pairs (pair, side) VALUES ($1, 2)', [pair]);
        });
        committed++;
      }
    };
    const writers = [writer(0), writer(1)];
    await eventually(() => committed >= 50, { timeout: 60_000, interval: 10, what: '50 pairs committed' });
    committedBefore = committed;
    backup = await backupService(s.platform).create();
    const after = committed;
    stop = true;
    await Promise.all(writers);
    expect(after).toBeGreaterThan(committedBefore); // writes went on around the backup
    expect(backup.row_counts['public.pairs']! % 2).toBe(0);
    expect(backup.row_counts['public.pairs']! / 2).toBeGreaterThanOrEqual(committedBefore);
    expect(backup.row_counts['ext_media_library.files']).toBe(1);
    console.log(
      `backup: ${backup.files} files, ${backup.bytes} bytes → ${backup.size} compressed; held ${backup.held_ms} ms, ${backup.total_ms} ms in all; ${committed} pairs committed in all`,
    );

    const m = (await readManifest(join(backupService(s.platform).dir, backup.name)))!;
    expect(m).toMatchObject({
      format: 'basalt-backup',
      format_version: 1,
      platform_version: s.platform.version,
      engine: { kind: 'embedded' },
      trigger: 'cli',
    });
    expect(m.files.every((f) => /^[0-9a-f]{64}$/.test(f.sha256))).toBe(true);
    expect(m.files.some((f) => f.path.startsWith('extensions/media-library/files/'))).toBe(true);
    expect(m.files.some((f) => f.path.endsWith('postmaster.pid'))).toBe(false);
  });

  test('an open transaction is waited for: the snapshot starts once it ends, and holds what it committed', async () => {
    const tx = await s.platform.db.begin();
    await tx.query('INSERT INTO public.pairs (pair, side) VALUES (-7, 1), (-7, 2)');
    let done = false;
    const pending = backupService(s.platform)
      .create()
      .then((b) => {
        done = true;
        return b;
      });
    await Bun.sleep(500);
    expect(done).toBe(false);
    await tx.commit();
    const b = await pending;
    expect(b.row_counts['public.pairs']).toBe(
      Number((await s.platform.db.query<{ n: string }>('SELECT count(*) AS n FROM public.pairs')).rows[0]!.n),
    );
    await backupService(s.platform).delete(b.name);
  });

  test('restored into a fresh data dir: every pair whole, the counts of the manifest, the uploaded file', async () => {
    const target = join(scratch, 'restored');
    const r = await restore({ archive: join(backupService(s.platform).dir, backup.name), dataDir: target });
    expect(r.previous).toBeUndefined();
    const db = await openEmbedded(join(target, 'pg'));
    try {
      const half = await db.query<{ n: string }>(
        'SELECT count(*) AS n FROM (SELECT pair FROM public.pairs GROUP BY pair HAVING count(*) <> 2) x',
      );
      expect(half.rows[0]!.n).toBe('0');
      const pairs = await db.query<{ n: string; max: number }>('SELECT count(DISTINCT pair) AS n FROM public.pairs');
      expect(Number(pairs.rows[0]!.n)).toBe(backup.row_counts['public.pairs']! / 2);
      expect(Number(pairs.rows[0]!.n)).toBeGreaterThanOrEqual(committedBefore);
      // The identity continues after the restored rows.
      const next = await db.query<{ id: string }>('INSERT INTO public.pairs (pair, side) VALUES (-1, 1) RETURNING id');
      const max = await db.query<{ id: string }>('SELECT max(id) AS id FROM public.pairs WHERE pair <> -1');
      expect(BigInt(next.rows[0]!.id)).toBeGreaterThan(BigInt(max.rows[0]!.id));
      const file = await db.query<{ storage_key: string; sha256: string }>(
        'SELECT storage_key, sha256 FROM ext_media_library.files WHERE id = $1',
        [fileId],
      );
      expect(file.rows.length).toBe(1);
      const bytes = readFileSync(join(target, 'extensions/media-library/files', file.rows[0]!.storage_key));
      expect(new Uint8Array(bytes)).toEqual(PNG);
    } finally {
      await db.close();
    }
    expect(existsSync(join(target, 'basalt.lock'))).toBe(false);
  });

  test('a restore over existing data keeps the old data beside it and carries the backups folder over', async () => {
    const target = join(scratch, 'existing');
    await restore({ archive: join(backupService(s.platform).dir, backup.name), dataDir: target });
    copyFileSync(join(backupService(s.platform).dir, backup.name), join(scratch, 'copy.tar.gz'));
    const backups = join(target, 'backups');
    require('node:fs').mkdirSync(backups);
    writeFileSync(join(backups, 'marker'), 'x');
    const r = await restore({
      archive: join(scratch, 'copy.tar.gz'),
      dataDir: target,
      now: new Date('2030-01-02T03:04:05Z'),
    });
    expect(r.previous).toBe(`${target}.before-restore-2030-01-02T03-04-05Z`);
    expect(existsSync(join(r.previous!, 'pg', 'PG_VERSION'))).toBe(true);
    expect(readFileSync(join(target, 'backups', 'marker'), 'utf8')).toBe('x');
    expect(readdirSync(dirname(target)).filter((n) => n.includes('.restore-'))).toEqual([]);
  });

  test('a data dir that is a mount point (a container volume) is restored inside itself, the old data kept in before-restore-<time>/', async () => {
    const target = join(scratch, 'volume');
    await restore({ archive: join(backupService(s.platform).dir, backup.name), dataDir: target, layout: 'inside' });
    require('node:fs').mkdirSync(join(target, 'backups'));
    writeFileSync(join(target, 'backups', 'marker'), 'x');
    const r = await restore({
      archive: join(backupService(s.platform).dir, backup.name),
      dataDir: target,
      layout: 'inside',
      now: new Date('2030-01-02T03:04:05Z'),
    });
    expect(r.previous).toBe(join(target, 'before-restore-2030-01-02T03-04-05Z'));
    expect(readdirSync(target).sort()).toEqual(['backups', 'before-restore-2030-01-02T03-04-05Z', 'extensions', 'pg']);
    expect(readdirSync(r.previous!).sort()).toEqual(['extensions', 'pg']);
    expect(readFileSync(join(target, 'backups', 'marker'), 'utf8')).toBe('x');
    const db = await openEmbedded(join(target, 'pg'));
    try {
      expect(Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM public.pairs')).rows[0]!.n)).toBe(
        backup.row_counts['public.pairs']!,
      );
    } finally {
      await db.close();
    }
  });

  describe('refused archives leave the current data untouched', () => {
    let dataDir: string;
    let archive: string;
    let before: string;
    beforeAll(async () => {
      dataDir = join(scratch, 'current');
      archive = join(backupService(s.platform).dir, backup.name);
      await restore({ archive, dataDir });
      before = fingerprint(dataDir);
    });
    const attempt = async (file: string) => {
      const r = await runCli(['restore', file], { BASALT_DATA_DIR: dataDir });
      expect(r.code).toBe(1);
      expect(fingerprint(dataDir)).toBe(before);
      expect(readdirSync(scratch).filter((n) => n.startsWith('current.'))).toEqual([]);
      return r.stderr.trim();
    };

    test('truncated', async () => {
      const bytes = readFileSync(archive);
      const cut = join(scratch, 'truncated.tar.gz');
      writeFileSync(cut, bytes.subarray(0, Math.floor(bytes.length * 0.6)));
      const msg = await attempt(cut);
      expect(msg).toMatch(
        /^basalt restore: the archive is truncated \(it ends (early|inside .*)\); nothing was changed$/,
      );
      expect(msg.split('\n').length).toBe(1);
    });

    test('one byte changed', async () => {
      const bytes = Buffer.from(readFileSync(archive));
      const at = Math.floor(bytes.length / 2);
      bytes[at] = bytes[at]! ^ 0xff;
      const bad = join(scratch, 'tampered.tar.gz');
      writeFileSync(bad, bytes);
      const msg = await attempt(bad);
      expect(msg).toMatch(/^basalt restore: .*(does not match its checksum|damaged).*; nothing was changed$/);
      expect(msg.split('\n').length).toBe(1);
    });

    test('a tar.gz that is not a Basalt backup, and a file that is not gzip', async () => {
      const foreign = join(scratch, 'foreign.tar.gz');
      await Bun.write(foreign, await new Bun.Archive({ 'hello.txt': 'hi' }, { compress: 'gzip' }).bytes());
      expect(await attempt(foreign)).toBe(
        'basalt restore: this is not a Basalt backup (it does not start with a basalt-backup.json manifest); nothing was changed',
      );
      const text = join(scratch, 'notes.txt');
      writeFileSync(text, 'not an archive at all');
      expect(await attempt(text)).toBe(
        'basalt restore: this is not a Basalt backup (not a gzip file); nothing was changed',
      );
    });

    test('an archive whose manifest claims another format version', async () => {
      const entries: Record<string, Uint8Array | string> = {};
      const m = (await readManifest(archive))!;
      entries['basalt-backup.json'] = JSON.stringify({ ...m, format_version: 99 });
      const odd = join(scratch, 'future.tar.gz');
      await Bun.write(odd, await new Bun.Archive(entries, { compress: 'gzip' }).bytes());
      expect(await attempt(odd)).toMatch(
        /^basalt restore: this backup has format 99, made by a newer Basalt .*; nothing was changed$/,
      );
    });
  });

  test('restore into the data dir this running platform holds is refused, nothing changed', async () => {
    const before = fingerprint(join(s.platform.dataDir, 'pg'));
    const r = await runCli(['restore', join(backupService(s.platform).dir, backup.name)], {
      BASALT_DATA_DIR: s.platform.dataDir,
    });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(
      /^basalt restore: the embedded database in .* is in use by basalt process \d+ .*; stop it first: restore needs the instance stopped; nothing was changed$/,
    );
    expect(existsSync(`${s.platform.dataDir}.restore-`)).toBe(false);
    expect(
      readdirSync(dirname(s.platform.dataDir)).filter((n) => n.startsWith(s.platform.dataDir.split('/').pop()! + '.')),
    ).toEqual([]);
    expect(fingerprint(join(s.platform.dataDir, 'pg')).split('\n').length).toBeGreaterThan(100);
    void before;
  });

  test('RestoreError for a missing archive names both places looked at', async () => {
    await expect(restore({ archive: 'nope.tar.gz', dataDir: join(scratch, 'x') })).rejects.toThrow(RestoreError);
  });
});

describe('backup service on a data dir', () => {
  test('list, path for a download, delete; names are checked', async () => {
    const db = await freshDb('embedded');
    const s = await startServer('embedded', { db });
    try {
      const svc = backupService(s.platform);
      const a = await svc.create();
      const b = await svc.create();
      expect(a.name).not.toBe(b.name);
      const list = await svc.list();
      expect(list.map((x) => x.name)).toEqual([b.name, a.name]);
      expect(list[0]).toMatchObject({ trigger: 'cli', platform_version: s.platform.version });
      expect(svc.pathFor(a.name)).toBe(join(svc.dir, a.name));
      expect(() => svc.pathFor('../pg/PG_VERSION')).toThrow(/is not a backup name/);
      expect(() => svc.pathFor('basalt-2001-01-01T00-00-00Z.tar.gz')).toThrow(/does not exist/);
      await svc.delete(a.name);
      expect((await svc.list()).map((x) => x.name)).toEqual([b.name]);
      expect(readdirSync(svc.dir).filter((n) => n.startsWith('.'))).toEqual([]);
    } finally {
      await s.stop();
      await db.drop();
    }
  });
});
