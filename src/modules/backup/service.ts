/**
 * Online backups of the embedded engine (docs/backup.md): one tar.gz per backup under
 * `<data.dir>/backups/`, holding the database cluster and the extensions' local files
 * (the media-library's uploads), with a manifest restore checks before it touches
 * anything. No HTTP here: the CLI, the schedule and the admin API call this service.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  createReadStream,
  existsSync,
  linkSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { copyFile, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Basalt } from '../../services';
import type { Queryable } from '../../db/engine';
import { quoteIdent } from '../../db/engine';
import { readArchive, writeArchive, type Entry } from './archive';
import { backupS3Target, deleteArchive, uploadArchive, type S3Target } from './s3';

export const MANIFEST_NAME = 'basalt-backup.json';
export const FORMAT = 'basalt-backup';
export const FORMAT_VERSION = 1;
/** `basalt-2026-11-23T19-05-00Z.tar.gz`, with `-N` when several start in one second. */
export const ARCHIVE_RE = /^basalt-(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})-(\d{2})Z(?:-\d{1,4})?\.tar\.gz$/;
/** Files of a running cluster that a copy must not carry (PostgreSQL's base backup rules). */
const PG_SKIP = new Set(['postmaster.pid', 'postmaster.opts']);

export type Trigger = 'cli' | 'schedule' | 'admin';

export interface Manifest {
  format: typeof FORMAT;
  format_version: number;
  platform_version: string;
  engine: { kind: 'embedded'; postgres: string; pg_major: string };
  created_at: string;
  trigger: Trigger;
  data_schema: string;
  /** Rows per table (schema.table) at the snapshot: basalt, the data schema, ext_*. */
  row_counts: Record<string, number>;
  dirs: string[];
  files: { path: string; size: number; sha256: string }[];
  /**
   * Where the snapshot stands in the WAL, for a point-in-time restore from it (docs/backup.md):
   * the first segment a start on it needs (its checkpoint's redo point), the timeline, the
   * segment size, and the moment of the snapshot (nothing commits while it is taken).
   */
  wal?: { start: string; timeline: number; segment_size: number; snapshot_at: string };
}

export interface BackupInfo {
  name: string;
  size: number;
  created_at: string;
  trigger: Trigger | null;
  platform_version: string | null;
}

export interface CreatedBackup extends BackupInfo {
  files: number;
  /** Bytes before compression. */
  bytes: number;
  /** How long the database was held for the snapshot, and the whole backup. */
  held_ms: number;
  total_ms: number;
  row_counts: Record<string, number>;
  /** The copy in S3 (`backup.s3_url`, or the Files module's bucket: docs/backup.md); null when there is none. */
  s3: { bucket: string; key: string | null; error?: string } | null;
}

export class BackupError extends Error {
  constructor(
    readonly code: 'not_supported' | 'not_found' | 'invalid_name',
    message: string,
  ) {
    super(message);
  }
}

export const NOT_SUPPORTED_MESSAGE =
  "Backups here are for the embedded engine; with external PostgreSQL use pg_dump, your provider's snapshots or point-in-time recovery (see docs/backup.md).";

export interface BackupService {
  readonly supported: boolean;
  /** `<data.dir>/backups` */
  readonly dir: string;
  create(opts?: { trigger?: Trigger }): Promise<CreatedBackup>;
  list(): Promise<BackupInfo[]>;
  /** Delete a local archive and its copy in S3. */
  delete(name: string): Promise<void>;
  /** Absolute path of an existing archive (for a download). */
  pathFor(name: string): string;
  /** Delete the oldest scheduled archives beyond `keep`, here and in S3; returns the names deleted. */
  prune(keep: number): Promise<string[]>;
}

const services = new WeakMap<Basalt, BackupService>();

/** The backup service of a platform (one per platform: creates are serialized). */
export function backupService(p: Basalt): BackupService {
  let s = services.get(p);
  if (!s) services.set(p, (s = create(p)));
  return s;
}

/** Tables whose rows a backup counts and export-to copies: basalt, the data schema, ext_*. */
export async function listTables(q: Queryable, dataSchema: string): Promise<{ schema: string; name: string }[]> {
  const { rows } = await q.query<{ schema: string; name: string }>(
    `SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind = 'r' AND (n.nspname = 'basalt' OR n.nspname = $1 OR n.nspname LIKE 'ext\\_%')
      ORDER BY 1, 2`,
    [dataSchema],
  );
  return rows;
}

/** Exact row counts of `tables`, in one statement. */
export async function countRows(
  q: Queryable,
  tables: { schema: string; name: string }[],
): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (let i = 0; i < tables.length; i += 200) {
    const part = tables.slice(i, i + 200);
    const sql =
      'SELECT ' +
      part
        .map((t, j) => `(SELECT count(*) FROM ${quoteIdent(t.schema)}.${quoteIdent(t.name)})::int8 AS c${j}`)
        .join(', ');
    const { rows } = await q.query<Record<string, string>>(sql);
    part.forEach((t, j) => {
      out[`${t.schema}.${t.name}`] = Number(rows[0]![`c${j}`]);
    });
  }
  return out;
}

export function sha256File(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(path, { highWaterMark: 1 << 20 })
      .on('data', (c) => h.update(c))
      .on('end', () => resolve(h.digest('hex')))
      .on('error', reject);
  });
}

/** Mirror `src` into `dst` with hard links (uploads are immutable once in place), copying when linking fails. */
function linkTree(src: string, dst: string, skip: (rel: string) => boolean, rel = ''): void {
  mkdirSync(dst, { recursive: true });
  for (const d of readdirSync(src, { withFileTypes: true })) {
    const r = rel ? `${rel}/${d.name}` : d.name;
    if (skip(r)) continue;
    const from = join(src, d.name);
    const to = join(dst, d.name);
    if (d.isDirectory()) linkTree(from, to, skip, r);
    else if (d.isFile()) {
      try {
        linkSync(from, to);
      } catch {
        try {
          copyFileSync(from, to);
        } catch (e) {
          // Deleted between the listing and the link: its row was deleted first, so it is not in the snapshot either.
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
        }
      }
    }
  }
}

/** Copy a directory tree, files in parallel (copy_file_range where the system has it). */
async function copyTree(src: string, dst: string, skip: (rel: string) => boolean, rel = ''): Promise<void> {
  await mkdir(dst, { recursive: true });
  const entries = await readdir(src, { withFileTypes: true });
  await Promise.all(
    entries.map((e) => {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (skip(r)) return undefined;
      if (e.isDirectory()) return copyTree(join(src, e.name), join(dst, e.name), skip, r);
      return e.isFile() ? copyFile(join(src, e.name), join(dst, e.name)) : undefined;
    }),
  );
}

/** Every directory and file under `root`, paths relative with '/'. */
async function walk(root: string, rel = ''): Promise<{ dirs: string[]; files: { path: string; size: number }[] }> {
  const dirs: string[] = [];
  const files: { path: string; size: number }[] = [];
  for (const d of (await readdir(join(root, rel), { withFileTypes: true })).sort((a, b) =>
    a.name < b.name ? -1 : 1,
  )) {
    const r = rel ? `${rel}/${d.name}` : d.name;
    if (d.isDirectory()) {
      dirs.push(r);
      const sub = await walk(root, r);
      dirs.push(...sub.dirs);
      files.push(...sub.files);
    } else if (d.isFile()) files.push({ path: r, size: (await stat(join(root, r))).size });
  }
  return { dirs, files };
}

/** Creation time encoded in an archive name. */
export function timeOfName(name: string): Date | undefined {
  const m = ARCHIVE_RE.exec(name);
  return m ? new Date(`${m[1]}T${m[2]}:${m[3]}:${m[4]}Z`) : undefined;
}

/** The archives in `dir` with their manifests (undefined when unreadable), in no order. */
export async function* archivesIn(dir: string): AsyncGenerator<{ name: string; path: string; manifest?: Manifest }> {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    if (!ARCHIVE_RE.test(name)) continue;
    const path = join(dir, name);
    let manifest: Manifest | undefined;
    try {
      manifest = await readManifest(path);
    } catch {}
    yield { name, path, manifest };
  }
}

const STOP = Symbol('stop');

/** The manifest of an archive (the first member), or undefined when there is none. */
export async function readManifest(path: string): Promise<Manifest | undefined> {
  let text: string | undefined;
  try {
    await readArchive(path, async (e) => {
      if (e.type !== 'file' || e.path !== MANIFEST_NAME || e.size > 64 << 20) throw STOP;
      const parts: Uint8Array[] = [];
      return {
        write: (c) => void parts.push(c),
        end: () => {
          text = Buffer.concat(parts).toString('utf8');
          throw STOP;
        },
      };
    });
  } catch (e) {
    if (e !== STOP) throw e;
  }
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as Manifest;
  } catch {
    return undefined;
  }
}

function create(p: Basalt): BackupService {
  const dir = join(p.dataDir, 'backups');
  const supported = p.db.kind === 'embedded';
  let queue: Promise<unknown> = Promise.resolve();
  let cleaned = false;

  function check(name: string): string {
    if (!ARCHIVE_RE.test(name))
      throw new BackupError(
        'invalid_name',
        `'${name.slice(0, 100)}' is not a backup name (basalt-YYYY-MM-DDTHH-MM-SSZ.tar.gz)`,
      );
    const path = join(dir, name);
    if (!existsSync(path)) throw new BackupError('not_found', `backup ${name} does not exist in ${dir}`);
    return path;
  }

  function notSupported(): never {
    throw new BackupError('not_supported', NOT_SUPPORTED_MESSAGE);
  }

  async function createNow(trigger: Trigger): Promise<CreatedBackup> {
    const started = performance.now();
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!cleaned) {
      // Leftovers of a backup cut short (process killed): never listed, safe to remove.
      for (const f of readdirSync(dir))
        if (f.startsWith('.staging-') || f.endsWith('.partial')) rmSync(join(dir, f), { recursive: true, force: true });
      cleaned = true;
    }
    const staging = join(dir, `.staging-${randomUUID()}`);
    const createdAt = new Date();
    const dataSchema = p.settings.get('database.data_schema');
    let held = 0;
    let partial: string | undefined;
    try {
      let counts: Record<string, number> = {};
      let walPlace: Manifest['wal'];
      let postgres = '';
      // The snapshot: a transaction on the embedded engine holds the whole database, so
      // while it is open no other statement runs (an open API transaction is waited
      // for first). CHECKPOINT writes every committed change into the data files; the
      // copy of pg/ is then a clean image of exactly the committed state.
      await p.db.transaction(async (tx) => {
        const t0 = performance.now();
        counts = await countRows(tx, await listTables(tx, dataSchema));
        postgres = (await tx.query<{ v: string }>('SELECT version() AS v')).rows[0]!.v.split(' on ')[0]!;
        await tx.exec('CHECKPOINT');
        // WAL needed to start on the copy: from the checkpoint's redo point to the current
        // insert position. Older segments and recycled ones kept for reuse are left out.
        const wal = (
          await tx.query<{ first: string; last: string; tli: number; size: string; at: Date }>(
            `SELECT pg_walfile_name(redo_lsn) AS first, pg_walfile_name(pg_current_wal_insert_lsn()) AS last,
                    timeline_id AS tli, (SELECT setting FROM pg_settings WHERE name = 'wal_segment_size') AS size,
                    clock_timestamp() AS at
               FROM pg_control_checkpoint()`,
          )
        ).rows[0]!;
        walPlace = {
          start: wal.first,
          timeline: Number(wal.tli),
          segment_size: Number(wal.size),
          snapshot_at: new Date(wal.at).toISOString(),
        };
        const unneededWal = (rel: string) => {
          const m = /^pg_wal\/([0-9A-F]{24})$/.exec(rel);
          return !!m && (m[1]! < wal.first || m[1]! > wal.last);
        };
        await copyTree(join(p.dataDir, 'pg'), join(staging, 'pg'), (rel) => PG_SKIP.has(rel) || unneededWal(rel));
        // Local uploads: rows are deleted before their bytes and bytes put in place before
        // their rows, so files linked now cover every row of the snapshot.
        const ext = join(p.dataDir, 'extensions');
        if (existsSync(ext)) linkTree(ext, join(staging, 'extensions'), (rel) => /^[^/]+\/tmp$/.test(rel));
        held = performance.now() - t0;
      });
      const pgMajor = readFileSync(join(staging, 'pg', 'PG_VERSION'), 'utf8').trim();
      const tree = await walk(staging);
      const files: Manifest['files'] = [];
      for (const f of tree.files) files.push({ ...f, sha256: await sha256File(join(staging, f.path)) });
      const manifest: Manifest = {
        format: FORMAT,
        format_version: FORMAT_VERSION,
        platform_version: p.version,
        engine: { kind: 'embedded', postgres, pg_major: pgMajor },
        created_at: createdAt.toISOString(),
        trigger,
        data_schema: dataSchema,
        row_counts: counts,
        dirs: tree.dirs,
        files,
        wal: walPlace,
      };
      const stamp = createdAt.toISOString().slice(0, 19).replace(/:/g, '-');
      let name = `basalt-${stamp}Z.tar.gz`;
      for (let i = 1; existsSync(join(dir, name)); i++) name = `basalt-${stamp}Z-${i}.tar.gz`;
      partial = join(dir, `.${name}.partial`);
      const manifestBytes = new TextEncoder().encode(JSON.stringify(manifest, null, 1));
      const entries: Entry[] = [
        { type: 'file', path: MANIFEST_NAME, size: manifestBytes.length, data: manifestBytes },
        ...tree.dirs.map((d): Entry => ({ type: 'dir', path: d })),
        ...tree.files.map((f): Entry => ({ type: 'file', path: f.path, size: f.size, source: join(staging, f.path) })),
      ];
      await writeArchive(partial, entries);
      renameSync(partial, join(dir, name));
      const size = statSync(join(dir, name)).size;
      let s3: CreatedBackup['s3'] = null;
      let target: S3Target | undefined;
      try {
        target = await backupS3Target(p, p.services.extensions);
        if (target) s3 = { bucket: target.bucket, key: await uploadArchive(target, join(dir, name), name) };
      } catch (e) {
        // The local archive is complete; the copy is a bonus that must not fail the backup.
        s3 = { bucket: target?.bucket ?? '', key: null, error: (e as Error).message.split('\n')[0] };
        p.log.warn('backup not copied to S3', { name, bucket: target?.bucket, cause: e });
      }
      return {
        name,
        size,
        created_at: manifest.created_at,
        trigger,
        platform_version: p.version,
        files: files.length,
        bytes: files.reduce((n, f) => n + f.size, 0),
        held_ms: Math.round(held),
        total_ms: Math.round(performance.now() - started),
        row_counts: counts,
        s3,
      };
    } finally {
      rmSync(staging, { recursive: true, force: true });
      if (partial) rmSync(partial, { force: true });
    }
  }

  /**
   * The copies in S3 of archives deleted here. A copy that cannot be deleted is logged and
   * left (the bucket's lifecycle rules remain the backstop): it never fails the local delete.
   */
  async function deleteCopies(names: string[]): Promise<void> {
    if (!names.length) return;
    let target: S3Target | undefined;
    try {
      target = await backupS3Target(p, p.services.extensions);
      if (target) for (const name of names) await deleteArchive(target, name);
    } catch (e) {
      p.log.warn('backup copy not deleted from S3', { names, bucket: target?.bucket, cause: e });
    }
  }

  async function list(): Promise<BackupInfo[]> {
    const out: BackupInfo[] = [];
    for await (const { name, path, manifest: m } of archivesIn(dir)) {
      // Retention may remove an archive between the listing and here: it is gone, not an error.
      const size = statSync(path, { throwIfNoEntry: false })?.size;
      if (size === undefined) continue;
      out.push({
        name,
        size,
        created_at: m?.created_at ?? timeOfName(name)!.toISOString(),
        trigger: m?.trigger ?? null,
        platform_version: m?.platform_version ?? null,
      });
    }
    return out.sort((a, b) =>
      a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : a.name < b.name ? 1 : -1,
    );
  }

  return {
    supported,
    dir,
    create(opts = {}) {
      if (!supported) notSupported();
      const run = queue.then(() => createNow(opts.trigger ?? 'cli'));
      queue = run.catch(() => {}); // the queue only orders runs; `run`'s caller gets its error
      return run;
    },
    async list() {
      if (!supported) notSupported();
      return list();
    },
    async delete(name) {
      if (!supported) notSupported();
      rmSync(check(name), { force: true });
      await deleteCopies([name]);
    },
    pathFor(name) {
      if (!supported) notSupported();
      return check(name);
    },
    async prune(keep) {
      const scheduled = (await list()).filter((b) => b.trigger === 'schedule');
      const gone: string[] = [];
      for (const b of scheduled.slice(Math.max(keep, 0))) {
        rmSync(join(dir, b.name), { force: true });
        gone.push(b.name);
      }
      await deleteCopies(gone);
      return gone;
    },
  };
}
