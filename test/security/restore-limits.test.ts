/**
 * Restore trusts neither the manifest's completeness nor its sizes (docs/backup.md,
 * "Restore"): a manifest that does not describe a whole data dir, a member declared larger
 * than any such file can be, or a total that would not fit are refused in one line before
 * anything is written, and the current data stays as it was. Before, a manifest listing no
 * `pg/` files "restored" a blank database and swapped it in, and a 1 MB archive could
 * expand into a 1 GiB file. The archives here are crafted with the platform's own writer.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDb, type FreshDb } from '../helpers/engines';
import { runCli } from '../helpers/cli';
import { fingerprint } from '../helpers/fingerprint';
import { writeArchive, type Entry } from '../../src/modules/backup/archive';
import { FORMAT, FORMAT_VERSION, MANIFEST_NAME } from '../../src/modules/backup/service';
import { restore, RestoreError } from '../../src/modules/backup/restore';

interface Member {
  path: string;
  data?: Uint8Array;
  /** Declared size when it differs from the data's (the member is then left out of the archive). */
  size?: number;
}

describe('restore checks the manifest before it writes', () => {
  let db: FreshDb;
  let scratch: string;
  let pgMajor: string;
  let before: string;
  beforeAll(async () => {
    db = await freshDb('embedded');
    scratch = mkdtempSync(join(tmpdir(), 'basalt-restore-limits-'));
    pgMajor = readFileSync(join(db.dataDir, 'pg', 'PG_VERSION'), 'utf8').trim();
    writeFileSync(join(db.dataDir, 'marker.txt'), 'the current data');
    before = fingerprint(db.dataDir);
  }, 120_000);
  afterAll(async () => {
    await db.drop();
    rmSync(scratch, { recursive: true, force: true });
  });

  const bytes = (s: string) => new TextEncoder().encode(s);
  /** A cluster's skeleton as a real manifest lists it, with tiny contents. */
  const skeleton = (): Member[] => [
    { path: 'pg/PG_VERSION', data: bytes(`${pgMajor}\n`) },
    { path: 'pg/global/pg_control', data: new Uint8Array(8192) },
    { path: 'pg/postgresql.conf', data: bytes('# crafted\n') },
    { path: 'pg/base/5/1259', data: new Uint8Array(8192) },
  ];
  const DIRS = ['pg', 'pg/base', 'pg/base/5', 'pg/global', 'pg/pg_wal', 'pg/pg_xact'];

  async function craft(
    name: string,
    members: Member[],
    dirs = DIRS,
    rowCounts: Record<string, number> = { 'basalt.settings': 0 },
  ) {
    const manifest = {
      format: FORMAT,
      format_version: FORMAT_VERSION,
      platform_version: 'crafted',
      engine: { kind: 'embedded', postgres: pgMajor, pg_major: pgMajor },
      created_at: new Date().toISOString(),
      trigger: 'cli',
      data_schema: 'public',
      row_counts: rowCounts,
      dirs,
      files: members.map((m) => ({
        path: m.path,
        size: m.size ?? m.data!.length,
        sha256: createHash('sha256')
          .update(m.data ?? new Uint8Array())
          .digest('hex'),
      })),
    };
    const entries: Entry[] = [
      { type: 'file', path: MANIFEST_NAME, size: 0, data: bytes(JSON.stringify(manifest)) },
      ...dirs.map((d): Entry => ({ type: 'dir', path: d })),
      ...members
        .filter((m) => m.data && m.size === undefined)
        .map((m): Entry => ({ type: 'file', path: m.path, size: m.data!.length, data: m.data! })),
    ];
    for (const e of entries) if (e.type === 'file' && 'data' in e) e.size = e.data.length;
    const file = join(scratch, name);
    await writeArchive(file, entries);
    return file;
  }

  async function refused(archive: string): Promise<string> {
    const e = await restore({ archive, dataDir: db.dataDir }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(RestoreError);
    // Nothing changed, nothing left over.
    expect(fingerprint(db.dataDir)).toBe(before);
    expect(readdirSync(join(db.dataDir, '..')).filter((n) => n.startsWith(`${db.dataDir.split('/').pop()}.`))).toEqual(
      [],
    );
    return (e as Error).message;
  }

  test('a manifest listing no pg/ files is not a data dir: refused (before: a blank database swapped in)', async () => {
    const archive = await craft(
      'no-pg.tar.gz',
      [{ path: 'extensions/media-library/readme.txt', data: bytes('hi') }],
      ['extensions', 'extensions/media-library'],
      {},
    );
    expect(await refused(archive)).toBe(
      'the backup manifest does not describe a complete Basalt data dir (it lacks pg/PG_VERSION, pg/global/pg_control, pg/postgresql.conf, pg/base/, pg/global/, pg/pg_wal/, pg/pg_xact/, pg/base/<database files>, row counts of basalt.*); it is damaged or altered',
    );
    // The command says it in one line.
    const cli = await runCli(['restore', archive], { BASALT_DATA_DIR: db.dataDir });
    expect(cli.code).toBe(1);
    expect(cli.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        /^basalt restore: the backup manifest does not describe a complete Basalt data dir .*; nothing was changed$/,
      ),
    ]);
    expect(fingerprint(db.dataDir)).toBe(before);
  }, 120_000);

  test('one required file missing is enough', async () => {
    const archive = await craft(
      'no-control.tar.gz',
      skeleton().filter((m) => m.path !== 'pg/global/pg_control'),
    );
    expect(await refused(archive)).toContain('(it lacks pg/global/pg_control)');
  });

  test('a member declared larger than any cluster file (1 GiB) is refused before anything is unpacked', async () => {
    const archive = await craft('bomb.tar.gz', [...skeleton(), { path: 'pg/base/5/16384', size: 1.5 * 1024 ** 3 }]);
    expect(await refused(archive)).toBe(
      'the backup manifest declares pg/base/5/16384 as 1610612736 bytes, more than such a file can be (1.00 GiB); it is damaged or altered',
    );
  });

  test('a total that would not fit the file system is refused before anything is unpacked', async () => {
    const huge = Array.from({ length: 4000 }, (_, i): Member => ({ path: `pg/base/5/${20000 + i}`, size: 1024 ** 3 }));
    const archive = await craft('huge.tar.gz', [...skeleton(), ...huge]);
    expect(await refused(archive)).toMatch(
      /^the backup unpacks to 4000\.\d\d GiB \(its manifest's sizes\) and the file system has [\d.]+ GiB free; make room first$/,
    );
  });

  test('a PG_VERSION that is not the manifest’s is refused, not opened', async () => {
    const members = skeleton().map((m) => (m.path === 'pg/PG_VERSION' ? { ...m, data: bytes('9\n') } : m));
    expect(await refused(await craft('version.tar.gz', members))).toBe(
      `the archive's pg/PG_VERSION says 9, its manifest PostgreSQL ${pgMajor}; it is damaged or altered`,
    );
  });
});
