/**
 * `basalt restore ARCHIVE` (docs/backup.md): on a stopped instance, unpack a backup into
 * a new directory beside the data dir while checking every member against the manifest,
 * open the copy once and compare its row counts, and only then swap it in by renames.
 * The current data is untouched until the restored copy is complete; it is kept as
 * `<data.dir>.before-restore-<time>`.
 */
import { createHash } from 'node:crypto';
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  statSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statfsSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { DataDirLockedError, lockDataDir } from '../../db/datadir-lock';
import { ArchiveDamagedError, readArchive } from './archive';
import { FORMAT, FORMAT_VERSION, MANIFEST_NAME, countRows, readManifest, type Manifest } from './service';
import {
  type Base,
  checkWalChain,
  chooseBase,
  PitrError,
  type PitrTarget,
  pitrBases,
  recover,
  type WalPlace,
} from './pitr';
import { walArchiveDir } from './wal-archive';
import { SETTINGS_BY_KEY } from '../../config/schema';

/** A restore refused or failed; the message is one line, and nothing was changed. */
export class RestoreError extends Error {}
/** The data dir is held by a running instance. */
export class DataDirInUseError extends RestoreError {}

export interface RestoreResult {
  dataDir: string;
  /** A point-in-time restore: the base backup, the moment asked for, and where PostgreSQL stopped. */
  pitr?: { base: string; target: string; stop: string };
  /** Where the previous data now is (undefined when the data dir was empty). */
  previous?: string;
  manifest: Manifest;
  files: number;
  ms: number;
}

/** `ARCHIVE` as given, or a name in `<data.dir>/backups/`. */
export function resolveArchive(arg: string, dataDir: string): string {
  if (existsSync(arg)) return resolve(arg);
  const inBackups = join(dataDir, 'backups', basename(arg));
  if (existsSync(inBackups)) return inBackups;
  throw new RestoreError(`archive ${arg} not found (neither that path nor ${inBackups})`);
}

/** A member path the archive may carry: relative, under pg/ or extensions/, no `..`. */
function safePath(p: string): boolean {
  if (!/^(pg|extensions)(\/|$)/.test(p) || p.includes('\0') || p.includes('\\')) return false;
  return p.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..');
}

/** What every embedded data dir holds; a manifest without them is not a whole cluster. */
const REQUIRED_FILES = ['pg/PG_VERSION', 'pg/global/pg_control', 'pg/postgresql.conf'];
const REQUIRED_DIRS = ['pg/base', 'pg/global', 'pg/pg_wal', 'pg/pg_xact'];
/** PostgreSQL never writes a file larger than one segment (RELSEG_SIZE × BLCKSZ: 1 GiB). */
export const PG_MEMBER_MAX = 1024 ** 3;
/** An extension's file is an upload: at most the ceiling of files.max_bytes. */
export const EXTENSION_MEMBER_MAX = SETTINGS_BY_KEY.get('files.max_bytes')!.max!;
/** Left free on the file system the restore writes to (PostgreSQL needs room to start). */
const FREE_MARGIN = 256 * 1024 ** 2;

const GiB = (n: number) => `${(n / 1024 ** 3).toFixed(2)} GiB`;

/**
 * The manifest describes a whole Basalt data dir (a cluster: PG_VERSION, pg_control, the
 * base/, global/, pg_wal/ and pg_xact/ directories, at least one database file, and row
 * counts of the platform's tables to check it against), and its declared sizes are
 * plausible: no cluster file over a segment, no upload over the largest allowed, the
 * whole fitting where it is unpacked. Checked before a byte is written.
 */
function checkComplete(x: Manifest, freeBytes: number | undefined): void {
  const files = new Set(x.files.map((f) => f.path));
  const lacking = [
    ...REQUIRED_FILES.filter((f) => !files.has(f)),
    ...REQUIRED_DIRS.filter((d) => !x.dirs.includes(d)).map((d) => `${d}/`),
  ];
  if (!x.files.some((f) => f.path.startsWith('pg/base/'))) lacking.push('pg/base/<database files>');
  if (!Object.keys(x.row_counts).some((k) => k.startsWith('basalt.'))) lacking.push('row counts of basalt.*');
  if (lacking.length)
    throw new RestoreError(
      `the backup manifest does not describe a complete Basalt data dir (it lacks ${lacking.join(', ')}); it is damaged or altered`,
    );
  let total = 0;
  for (const f of x.files) {
    const max = f.path.startsWith('pg/') ? PG_MEMBER_MAX : EXTENSION_MEMBER_MAX;
    if (!Number.isSafeInteger(f.size) || f.size < 0 || f.size > max)
      throw new RestoreError(
        `the backup manifest declares ${f.path.slice(0, 100)} as ${f.size} bytes, more than such a file can be (${GiB(max)}); it is damaged or altered`,
      );
    total += f.size;
  }
  if (freeBytes !== undefined && total + FREE_MARGIN > freeBytes)
    throw new RestoreError(
      `the backup unpacks to ${GiB(total)} (its manifest's sizes) and the file system has ${GiB(freeBytes)} free; make room first`,
    );
}

function checkManifest(m: unknown, pgMajor: string | undefined, freeBytes?: number): Manifest {
  const x = m as Manifest;
  if (!x || x.format !== FORMAT)
    throw new RestoreError('this is not a Basalt backup (its manifest is not a basalt-backup manifest)');
  if (typeof x.format_version !== 'number' || x.format_version > FORMAT_VERSION) {
    throw new RestoreError(
      `this backup has format ${x.format_version}, made by a newer Basalt (${x.platform_version}); this one reads format ${FORMAT_VERSION}: restore it with that version`,
    );
  }
  if (x.engine?.kind !== 'embedded') throw new RestoreError('this backup is not of an embedded database');
  if (pgMajor && x.engine.pg_major !== pgMajor) {
    throw new RestoreError(
      `this backup holds PostgreSQL ${x.engine.pg_major} data files; this basalt embeds PostgreSQL ${pgMajor}: restore it with the Basalt version that made it (${x.platform_version})`,
    );
  }
  if (!Array.isArray(x.files) || !Array.isArray(x.dirs) || typeof x.row_counts !== 'object')
    throw new RestoreError('the backup manifest is incomplete');
  for (const f of x.files)
    if (!safePath(f.path) || typeof f.sha256 !== 'string' || typeof f.size !== 'number')
      throw new RestoreError(
        `the backup manifest names an unsafe or malformed member '${String(f.path).slice(0, 100)}'`,
      );
  for (const d of x.dirs)
    if (!safePath(d))
      throw new RestoreError(`the backup manifest names an unsafe directory '${String(d).slice(0, 100)}'`);
  checkComplete(x, freeBytes);
  return x;
}

/** Bytes free for an unprivileged writer on the file system holding `dir` (undefined when unknown). */
function freeSpace(dir: string): number | undefined {
  try {
    const s = statfsSync(dir);
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return undefined;
  }
}

/** Unpack and verify `archive` into `target` (created; must not exist). Returns the manifest. */
export async function unpackVerified(
  archive: string,
  target: string,
  pgMajor?: string,
): Promise<{ manifest: Manifest; files: number }> {
  let manifest: Manifest | undefined;
  const expected = new Map<string, { size: number; sha256: string }>();
  const seen = new Set<string>();
  mkdirSync(target, { recursive: false, mode: 0o700 });
  const free = freeSpace(target);
  /** Bytes written so far, never past what the manifest declares (each member is held to its own size too). */
  let written = 0;
  let declared = 0;
  try {
    await readArchive(archive, async (e) => {
      if (!manifest) {
        if (e.type !== 'file' || e.path !== MANIFEST_NAME)
          throw new RestoreError('this is not a Basalt backup (it does not start with a basalt-backup.json manifest)');
        if (e.size > 256 << 20)
          throw new RestoreError('the backup manifest is implausibly large; the archive is damaged');
        const parts: Uint8Array[] = [];
        return {
          write: (c) => void parts.push(c),
          end: () => {
            let parsed: unknown;
            try {
              parsed = JSON.parse(Buffer.concat(parts).toString('utf8'));
            } catch {
              throw new RestoreError('the backup manifest is not valid JSON; the archive is damaged');
            }
            manifest = checkManifest(parsed, pgMajor, free);
            for (const f of manifest.files) expected.set(f.path, f);
            declared = manifest.files.reduce((n, f) => n + f.size, 0);
            for (const d of manifest.dirs) mkdirSync(join(target, d), { recursive: true, mode: 0o700 });
          },
        };
      }
      if (e.type === 'dir') {
        if (!manifest.dirs.includes(e.path))
          throw new RestoreError(
            `the archive holds a directory the manifest does not list (${e.path.slice(0, 100)}); it is damaged or altered`,
          );
        return undefined;
      }
      const want = expected.get(e.path);
      if (!want || seen.has(e.path))
        throw new RestoreError(
          `the archive holds a file the manifest does not list (${e.path.slice(0, 100)}); it is damaged or altered`,
        );
      if (want.size !== e.size)
        throw new RestoreError(
          `${e.path}: ${e.size} bytes in the archive, ${want.size} in the manifest; the archive is damaged or altered`,
        );
      seen.add(e.path);
      const out = join(target, e.path);
      mkdirSync(dirname(out), { recursive: true, mode: 0o700 });
      const fd = openSync(out, 'wx', 0o600);
      const hash = createHash('sha256');
      let member = 0;
      return {
        write(c) {
          // The reader stops at the header's size, which equals the manifest's; kept here too,
          // so no change to the reader can make a member or the whole outgrow what was declared.
          member += c.length;
          written += c.length;
          if (member > want.size || written > declared)
            throw new RestoreError(`${e.path} is larger than its manifest says; the archive is damaged or altered`);
          hash.update(c);
          let off = 0;
          while (off < c.length) off += writeSync(fd, c, off);
        },
        end() {
          closeSync(fd);
          if (hash.digest('hex') !== want.sha256)
            throw new RestoreError(
              `${e.path} does not match its checksum in the manifest; the archive is damaged or altered`,
            );
        },
      };
    });
  } catch (e) {
    rmSync(target, { recursive: true, force: true });
    if (e instanceof ArchiveDamagedError) throw new RestoreError(e.message);
    throw e;
  }
  const missing = [...expected.keys()].filter((p) => !seen.has(p));
  if (!manifest || missing.length) {
    rmSync(target, { recursive: true, force: true });
    throw new RestoreError(
      manifest
        ? `the archive lacks ${missing.length} file(s) its manifest lists (first: ${missing[0]}); it is truncated or damaged`
        : 'the archive is empty; this is not a Basalt backup',
    );
  }
  // The cluster is the one the manifest describes: opening a directory without one would create a blank one.
  const version = join(target, 'pg', 'PG_VERSION');
  const found = existsSync(version) ? readFileSync(version, 'utf8').trim() : undefined;
  if (found !== manifest.engine.pg_major) {
    rmSync(target, { recursive: true, force: true });
    throw new RestoreError(
      `the archive's pg/PG_VERSION says ${found ?? 'nothing'}, its manifest PostgreSQL ${manifest.engine.pg_major}; it is damaged or altered`,
    );
  }
  return { manifest, files: seen.size };
}

/** The moment a point-in-time restore goes to; a migration's is when its transaction began (its commit is after). */
async function targetTime(t: PitrTarget, dataDir: string): Promise<Date | 'latest'> {
  if (t.kind === 'latest') return 'latest';
  if (t.kind === 'time') {
    if (Number.isNaN(t.at.getTime())) throw new RestoreError('the time to restore to is not a valid time');
    if (t.at.getTime() > Date.now()) throw new RestoreError(`${t.at.toISOString()} is in the future`);
    return t.at;
  }
  if (!existsSync(join(dataDir, 'pg', 'PG_VERSION')))
    throw new RestoreError(
      `--before-migration reads when ${t.name} ran from the current data, and ${dataDir} has none`,
    );
  const { openEmbedded } = await import('../../db/embedded');
  const db = await openEmbedded(join(dataDir, 'pg'));
  try {
    const { rows } = await db.query<{ at: Date }>(
      'SELECT applied_at AS at FROM basalt.schema_migrations WHERE name = $1',
      [t.name],
    );
    if (!rows[0]) throw new RestoreError(`migration ${t.name} was never applied here (basalt.schema_migrations)`);
    return new Date(rows[0].at);
  } finally {
    await db.close();
  }
}

/** An archive given with `--to`: it must record its place in the WAL and be older than the target. */
async function baseFrom(path: string, target: Date | 'latest'): Promise<Base> {
  const manifest = await readManifest(path).catch(() => undefined);
  if (!manifest?.wal)
    throw new RestoreError(
      `${basename(path)} records no WAL position (made by an older Basalt, or it is not a Basalt backup): it cannot start a point-in-time restore`,
    );
  if (target !== 'latest' && new Date(manifest.wal.snapshot_at) > target)
    throw new RestoreError(
      `${basename(path)} was taken at ${manifest.wal.snapshot_at}, after ${target.toISOString()}: restore from an older backup`,
    );
  return { name: basename(path), path, manifest: manifest as Base['manifest'] };
}

/** Remove `<dir>/basalt.lock` when this process wrote it. */
function dropOwnLock(dir: string): void {
  const file = join(dir, 'basalt.lock');
  try {
    if ((JSON.parse(readFileSync(file, 'utf8')) as { pid: number }).pid === process.pid) unlinkSync(file);
  } catch {}
}

/** The parent of the data dir is on the same file system and writable (so whole-directory renames work). */
function besideIsPossible(dataDir: string): boolean {
  const parent = dirname(dataDir);
  try {
    accessSync(parent, constants.W_OK);
    return statSync(parent).dev === statSync(dataDir).dev;
  } catch {
    return false;
  }
}

/**
 * Restore `archive` into `dataDir` (the embedded data dir of a stopped instance). With `pitr`,
 * a point-in-time restore (src/modules/backup/pitr.ts): the base backup is `archive` when given,
 * else the newest in `<data.dir>/backups` taken before the target, and the WAL archive
 * (`walDir`, by default `<data.dir>/backups/wal`) is replayed into it up to the target.
 */
export async function restore(opts: {
  archive?: string;
  pitr?: { target: PitrTarget; walDir?: string };
  dataDir: string;
  now?: Date /** Force where the copy is made (tests); decided from the file system otherwise. */;
  layout?: 'beside' | 'inside';
}): Promise<RestoreResult> {
  const started = performance.now();
  const dataDir = resolve(opts.dataDir);
  if (!opts.archive && !opts.pitr) throw new RestoreError('restore needs an archive');
  const given = opts.archive ? resolveArchive(opts.archive, dataDir) : undefined;
  const existed = existsSync(dataDir);
  let release: () => void;
  try {
    release = lockDataDir(dataDir);
  } catch (e) {
    if (e instanceof DataDirLockedError)
      throw new DataDirInUseError(
        `${e.message.replace(/; stop it.*$/, '')}; stop it first: restore needs the instance stopped`,
      );
    throw e;
  }
  const stamp = (opts.now ?? new Date()).toISOString().slice(0, 19).replace(/:/g, '-') + 'Z';
  // Beside the data dir, so the swap is two renames of whole directories. When the data dir
  // is a mount point (a container volume) or its parent is not writable, inside it instead:
  // the swap then moves its entries one by one, still renames within one file system.
  const inside = opts.layout ? opts.layout === 'inside' : !besideIsPossible(dataDir);
  const staging = inside ? join(dataDir, `.restore-${stamp}`) : `${dataDir}.restore-${stamp}`;
  const previous = inside ? join(dataDir, `before-restore-${stamp}`) : `${dataDir}.before-restore-${stamp}`;
  try {
    if (existsSync(staging) || existsSync(previous))
      throw new RestoreError(`${staging} or ${previous} already exists; move it away first`);
    // The engine's major version, as the current cluster records it (a fresh data dir has none to compare).
    const versionFile = join(dataDir, 'pg', 'PG_VERSION');
    const pgMajor = existsSync(versionFile) ? readFileSync(versionFile, 'utf8').trim() : undefined;
    let archive = given;
    let pitr: RestoreResult['pitr'];
    let point: { walDir: string; target: Date | 'latest'; wal: WalPlace } | undefined;
    if (opts.pitr) {
      const walDir = opts.pitr.walDir ?? walArchiveDir(dataDir);
      const target = await targetTime(opts.pitr.target, dataDir);
      let base: Base;
      try {
        base = given ? await baseFrom(given, target) : chooseBase(await pitrBases(join(dataDir, 'backups')), target);
        checkWalChain(walDir, base.manifest.wal, target);
      } catch (e) {
        if (e instanceof PitrError) throw new RestoreError(e.message);
        throw e;
      }
      point = { walDir, target, wal: base.manifest.wal };
      archive = base.path;
    }
    const { manifest, files } = await unpackVerified(archive!, staging, pgMajor);
    if (point) {
      // Replay the archived WAL into the copy up to the target; PostgreSQL opens it on a new timeline.
      try {
        const { openEmbedded } = await import('../../db/embedded');
        const r = await recover(join(staging, 'pg'), point.walDir, point.wal, point.target, (dir, recovery) =>
          openEmbedded(dir, { recovery }),
        );
        pitr = {
          base: basename(archive!),
          target: point.target === 'latest' ? 'latest' : point.target.toISOString(),
          stop: r.stop,
        };
      } catch (e) {
        rmSync(staging, { recursive: true, force: true });
        if (e instanceof PitrError) throw new RestoreError(e.message);
        throw new RestoreError(
          `the restored database does not open (${(e as Error).message.split('\n')[0]}); not restored`,
        );
      }
    }
    // Open the copy once: PostgreSQL starts on it, and it holds the rows the manifest counted.
    if (!point)
      try {
        const { openEmbedded } = await import('../../db/embedded');
        const db = await openEmbedded(join(staging, 'pg'));
        try {
          const tables = Object.keys(manifest.row_counts).map((k) => {
            const i = k.indexOf('.');
            return { schema: k.slice(0, i), name: k.slice(i + 1) };
          });
          const counts = await countRows(db, tables);
          for (const [k, n] of Object.entries(manifest.row_counts)) {
            if (counts[k] !== n)
              throw new RestoreError(
                `the restored database has ${counts[k]} rows in ${k}, the backup's manifest ${n}; not restored`,
              );
          }
        } finally {
          await db.close();
        }
      } catch (e) {
        rmSync(staging, { recursive: true, force: true });
        if (e instanceof RestoreError) throw e;
        throw new RestoreError(
          `the restored database does not open (${(e as Error).message.split('\n')[0]}); not restored`,
        );
      }
    // The swap: renames only.
    if (inside) {
      const keep = new Set(['basalt.lock', 'basalt.sock', 'backups', basename(staging), basename(previous)]);
      const moving = readdirSync(dataDir).filter((f) => !keep.has(f) && !f.startsWith('before-restore-'));
      if (moving.length) mkdirSync(previous, { mode: 0o700 });
      for (const f of moving) renameSync(join(dataDir, f), join(previous, f));
      for (const f of readdirSync(staging)) renameSync(join(staging, f), join(dataDir, f));
      rmSync(staging, { recursive: true, force: true });
      return {
        dataDir,
        pitr,
        previous: moving.length ? previous : undefined,
        manifest,
        files,
        ms: Math.round(performance.now() - started),
      };
    }
    const holding = existed && readdirSync(dataDir).some((f) => f !== 'basalt.lock' && f !== 'basalt.sock');
    if (holding) {
      renameSync(dataDir, previous);
      renameSync(staging, dataDir);
      // Earlier backups stay where the operator expects them.
      if (existsSync(join(previous, 'backups'))) renameSync(join(previous, 'backups'), join(dataDir, 'backups'));
      dropOwnLock(previous);
      rmSync(join(previous, 'basalt.sock'), { force: true });
    } else {
      rmSync(dataDir, { recursive: true, force: true });
      renameSync(staging, dataDir);
    }
    return {
      dataDir,
      pitr,
      previous: holding ? previous : undefined,
      manifest,
      files,
      ms: Math.round(performance.now() - started),
    };
  } finally {
    release();
    dropOwnLock(dataDir);
  }
}
