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
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { DataDirLockedError, lockDataDir } from '../../db/datadir-lock';
import { ArchiveDamagedError, readArchive } from './archive';
import { FORMAT, FORMAT_VERSION, MANIFEST_NAME, countRows, type Manifest } from './service';

/** A restore refused or failed; the message is one line, and nothing was changed. */
export class RestoreError extends Error {}

export interface RestoreResult {
  dataDir: string;
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

function checkManifest(m: unknown, pgMajor: string | undefined): Manifest {
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
  return x;
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
            manifest = checkManifest(parsed, pgMajor);
            for (const f of manifest.files) expected.set(f.path, f);
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
      return {
        write(c) {
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
  return { manifest, files: seen.size };
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

/** Restore `archive` into `dataDir` (the embedded data dir of a stopped instance). */
export async function restore(opts: {
  archive: string;
  dataDir: string;
  now?: Date /** Force where the copy is made (tests); decided from the file system otherwise. */;
  layout?: 'beside' | 'inside';
}): Promise<RestoreResult> {
  const started = performance.now();
  const dataDir = resolve(opts.dataDir);
  const archive = resolveArchive(opts.archive, dataDir);
  const existed = existsSync(dataDir);
  let release: () => void;
  try {
    release = lockDataDir(dataDir);
  } catch (e) {
    if (e instanceof DataDirLockedError)
      throw new RestoreError(
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
    const { manifest, files } = await unpackVerified(archive, staging, pgMajor);
    // Open the copy once: PostgreSQL starts on it, and it holds the rows the manifest counted.
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
