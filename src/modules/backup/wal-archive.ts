/**
 * The WAL archive of the embedded engine, for point-in-time restore (docs/backup.md,
 * "Point-in-time restore"; docs/architecture.md, "Point-in-time restore of the embedded engine").
 *
 * The engine runs without a postmaster, so PostgreSQL's own archiver (`archive_mode`) never runs:
 * Basalt copies the segments itself, from `<data.dir>/pg/pg_wal` to `<data.dir>/backups/wal`:
 *
 * - a segment once the WAL flushed has passed its end (checked every second), as
 *   `<segment>` with `<segment>.sha256` beside it;
 * - the segment being written, up to the WAL flushed, as `<segment>.partial` (+ `.sha256`)
 *   at least every `backup.wal_flush_seconds` while commits come, and when the server stops;
 * - a segment PostgreSQL is about to remove or recycle before it was copied, right then, in
 *   line (the file layer calls `beforeSegmentGone`): a bulk load that fills several segments
 *   within one statement loses none;
 * - timeline history files (`<timeline>.history`, written by a restore) as they appear.
 *
 * Retention (`backup.pitr_days`): segments older than the start of the newest base backup made
 * at least `pitr_days` ago are deleted (with no such backup, those before the oldest base
 * backup; with no base backup at all, those before the current segment: nothing could use them). A copy is written under a temporary name and renamed, so a listed file is whole; its
 * checksum is what a restore checks it against.
 */
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { EngineWal, Queryable } from '../../db/engine';

/** `<data.dir>/backups/wal` */
export const walArchiveDir = (dataDir: string) => join(dataDir, 'backups', 'wal');

const SEGMENT = /^([0-9A-F]{8})([0-9A-F]{8})([0-9A-F]{8})$/;
const ARCHIVED = /^([0-9A-F]{24})(\.partial)?$/;
const HISTORY = /^[0-9A-F]{8}\.history$/;

/** A segment's place: its timeline and its number (counted from the start of the WAL). */
export interface SegmentId {
  tli: number;
  segno: number;
}

/** The segment file name of `segno` on `tli` (PostgreSQL's XLogFileName). */
export function segmentName(tli: number, segno: number, segmentSize: number): string {
  const perId = 0x1_0000_0000 / segmentSize;
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(8, '0');
  return hex(tli) + hex(Math.floor(segno / perId)) + hex(segno % perId);
}

export function parseSegment(name: string, segmentSize: number): SegmentId | undefined {
  const m = SEGMENT.exec(name);
  if (!m) return undefined;
  return {
    tli: Number.parseInt(m[1]!, 16),
    segno: Number.parseInt(m[2]!, 16) * (0x1_0000_0000 / segmentSize) + Number.parseInt(m[3]!, 16),
  };
}

/** The text of a `.sha256` file: `<hash>  <name>`, as sha256sum writes it. */
export const hashLine = (hash: string, name: string) => `${hash}  ${name}\n`;

/** One archived file: a whole segment, the partial copy of one, or a history file. */
export interface ArchivedFile {
  name: string;
  path: string;
  /** The segment, for segments and partial copies. */
  segment?: SegmentId & { name: string };
  partial: boolean;
  mtime: Date;
}

/** What `dir` holds (files with no checksum beside them are listed too: a restore names them). */
export function listArchived(dir: string, segmentSize: number): ArchivedFile[] {
  if (!existsSync(dir)) return [];
  const out: ArchivedFile[] = [];
  for (const name of readdirSync(dir)) {
    const m = ARCHIVED.exec(name);
    if (!m && !HISTORY.test(name)) continue;
    const path = join(dir, name);
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) continue;
    const id = m ? parseSegment(m[1]!, segmentSize) : undefined;
    out.push({
      name,
      path,
      segment: id && { ...id, name: m![1]! },
      partial: !!m?.[2],
      mtime: st.mtime,
    });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** The checksum `<file>.sha256` records, or undefined when there is none. */
export function recordedHash(path: string): string | undefined {
  try {
    return readFileSync(`${path}.sha256`, 'utf8').trim().split(/\s+/)[0];
  } catch {
    return undefined;
  }
}

export const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

export interface WalArchiverOptions {
  dataDir: string;
  wal: EngineWal;
  /** Read once at the start: the timeline and the segment size. */
  db: Queryable;
  flushSeconds: () => number;
  pitrDays: () => number;
  /** Base backups: when each snapshot was taken and the first segment it needs. */
  bases: () => Promise<{ snapshotAt: Date; start: string }[]>;
  log: { info(msg: string, f?: object): void; warn(msg: string, f?: object): void };
  /** A file newly archived (path, name): the copy to S3 (src/modules/backup/service.ts). */
  archived?: (path: string, name: string) => Promise<void>;
  /** Deleted by retention. */
  pruned?: (names: string[]) => Promise<void>;
}

export interface WalArchiver {
  /** Archive what is flushed now (completed segments, the current one as .partial). */
  flush(): Promise<void>;
  /** Flush and stop. */
  stop(): Promise<void>;
}

const TICK_MS = 1000;
const PRUNE_EVERY_MS = 10 * 60_000;

/** Start archiving the engine's WAL; the caller stops it before the engine closes. */
export async function startWalArchiver(o: WalArchiverOptions): Promise<WalArchiver> {
  const dir = walArchiveDir(o.dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const { rows } = await o.db.query<{ tli: number; size: string }>(
    "SELECT timeline_id AS tli, (SELECT setting FROM pg_settings WHERE name = 'wal_segment_size') AS size FROM pg_control_checkpoint()",
  );
  const tli = Number(rows[0]!.tli);
  const size = Number(rows[0]!.size);
  const name = (segno: number) => segmentName(tli, segno, size);
  const current = () => Number(o.wal.flushed() / BigInt(size));

  // Where to go on from: after the newest whole segment of this timeline archived; with none,
  // from the oldest segment of it still in pg_wal (before the current one: later names there
  // are recycled files waiting for reuse).
  const archived = listArchived(dir, size).filter((f) => f.segment?.tli === tli && !f.partial);
  const now = current();
  let next: number;
  if (archived.length) next = archived.at(-1)!.segment!.segno + 1;
  else {
    const inWal = readdirSync(o.wal.dir)
      .map((f) => parseSegment(f, size))
      .filter((s): s is SegmentId => !!s && s.tli === tli && s.segno <= now)
      .map((s) => s.segno);
    next = inWal.length ? Math.min(...inWal) : now;
  }
  let partialLsn = -1n;
  let partialAt = 0;
  let lastPrune = 0;
  let stopped = false;
  /** The rounds, one after another (the timer's and `flush`'s). */
  let chain: Promise<void> = Promise.resolve();
  let busy = false;
  let warnedAt = 0;
  const missing = new Set<string>();
  /** The segment a round is copying now (already past `next`): PostgreSQL may still take it away. */
  let inFlight: number | undefined;

  /** Copy a whole segment, in line (from `beforeSegmentGone`) or not. */
  const copyWhole = (segno: number, bytes: Uint8Array) => {
    const n = name(segno);
    // Not the round's temporary name: a round may be writing the same segment at this moment.
    const tmp = join(dir, `.${n}.inline.tmp`);
    writeFileSync(tmp, bytes, { mode: 0o600 });
    writeFileSync(join(dir, `${n}.sha256`), hashLine(sha256(bytes), n), { mode: 0o600 });
    renameSync(tmp, join(dir, n));
    rmSync(join(dir, `${n}.partial`), { force: true });
    rmSync(join(dir, `${n}.partial.sha256`), { force: true });
  };
  const done = new Set<number>();

  // PostgreSQL removes or recycles a segment: copy it first if it is complete and not archived.
  o.wal.beforeSegmentGone = (path) => {
    const id = parseSegment(path.slice(-24), size);
    if (!id || id.tli !== tli || id.segno >= current() || done.has(id.segno)) return;
    if (id.segno < next && id.segno !== inFlight) return;
    try {
      copyWhole(id.segno, readFileSync(path));
      done.add(id.segno);
    } catch (e) {
      o.log.warn('WAL segment not archived before PostgreSQL reused it', { segment: path.slice(-24), cause: e });
    }
  };

  /** Copy a whole segment in a round; `beforeSegmentGone` copies it in line if PostgreSQL takes it away meanwhile. */
  async function archiveWhole(segno: number): Promise<void> {
    inFlight = segno;
    try {
      await copyRound(segno);
    } finally {
      inFlight = undefined;
      done.delete(segno);
    }
  }

  async function copyRound(segno: number): Promise<void> {
    const n = name(segno);
    if (done.has(segno)) return o.archived?.(join(dir, n), n); // copied in line already
    const src = join(o.wal.dir, n);
    let bytes: Buffer;
    try {
      bytes = await readFile(src);
    } catch {
      // Taken away before this read opened it: copied in line first, unless the copy failed.
      if (done.has(segno)) return o.archived?.(join(dir, n), n);
      if (!missing.has(n))
        o.log.warn('WAL segment gone before it was archived: a point-in-time restore cannot pass it', { segment: n });
      missing.add(n);
      return;
    }
    const tmp = join(dir, `.${n}.tmp`);
    await writeFile(tmp, bytes, { mode: 0o600 });
    await writeFile(join(dir, `${n}.sha256`), hashLine(sha256(bytes), n), { mode: 0o600 });
    await rename(tmp, join(dir, n));
    await rm(join(dir, `${n}.partial`), { force: true });
    await rm(join(dir, `${n}.partial.sha256`), { force: true });
    await o.archived?.(join(dir, n), n);
  }

  async function archivePartial(segno: number, upTo: number): Promise<void> {
    const n = `${name(segno)}.partial`;
    let bytes: Buffer;
    try {
      bytes = (await readFile(join(o.wal.dir, name(segno)))).subarray(0, upTo);
    } catch {
      return; // the segment completes meanwhile: the next round archives it whole
    }
    const tmp = join(dir, `.${n}.tmp`);
    await writeFile(tmp, bytes, { mode: 0o600 });
    await writeFile(join(dir, `${n}.sha256`), hashLine(sha256(bytes), n), { mode: 0o600 });
    await rename(tmp, join(dir, n));
    await o.archived?.(join(dir, n), n);
  }

  function copyHistory(): void {
    for (const f of readdirSync(o.wal.dir)) {
      if (!HISTORY.test(f) || existsSync(join(dir, f))) continue;
      const bytes = readFileSync(join(o.wal.dir, f));
      writeFileSync(join(dir, `${f}.sha256`), hashLine(sha256(bytes), f), { mode: 0o600 });
      copyFileSync(join(o.wal.dir, f), join(dir, f));
    }
  }

  async function prune(): Promise<void> {
    const days = o.pitrDays();
    const bases = (await o.bases()).sort((a, b) => a.snapshotAt.getTime() - b.snapshotAt.getTime());
    const edge = Date.now() - days * 86_400_000;
    const from = bases.filter((b) => b.snapshotAt.getTime() <= edge).at(-1) ?? bases[0];
    // With no base backup, no restore can use what is archived: a backup made from now on
    // starts at a checkpoint in the current segment or later.
    const keepFrom = from ? parseSegment(from.start, size)?.segno : current();
    if (keepFrom === undefined) return;
    const gone: string[] = [];
    // Without a base, an hour's grace: a backup under way lists its archive only once it is written.
    const before = from ? Number.POSITIVE_INFINITY : Date.now() - 3_600_000;
    for (const f of listArchived(dir, size))
      if (f.segment && f.segment.segno < keepFrom && f.mtime.getTime() < before) {
        rmSync(f.path, { force: true });
        rmSync(`${f.path}.sha256`, { force: true });
        gone.push(f.name);
      }
    if (gone.length) {
      o.log.info('WAL archive pruned', { segments: gone.length, kept_from: segmentName(tli, keepFrom, size) });
      await o.pruned?.(gone);
    }
  }

  async function round(force: boolean): Promise<void> {
    const lsn = o.wal.flushed();
    if (lsn === 0n) return; // the engine stopped
    const seg = Number(lsn / BigInt(size));
    if (o.pitrDays() === 0) {
      // Archiving off (backup.pitr_days = 0): when turned on, it starts from the segment then written.
      next = seg;
      return;
    }
    while (next < seg) await archiveWhole(next++);
    const off = Number(lsn % BigInt(size));
    if (lsn > partialLsn && off > 0 && (force || Date.now() - partialAt >= o.flushSeconds() * 1000)) {
      await archivePartial(seg, off);
      partialLsn = lsn;
      partialAt = Date.now();
    }
    copyHistory();
    if (Date.now() - lastPrune >= PRUNE_EVERY_MS) {
      lastPrune = Date.now();
      await prune();
    }
  }

  /** One round after those before it; rejects with its error, which is also logged (once a minute). */
  const run = (force: boolean): Promise<void> => {
    const r = chain.then(() => round(force));
    chain = r.catch((e) => {
      // Tried again every second (a full disk, say): said once a minute.
      if (Date.now() - warnedAt < 60_000) return;
      warnedAt = Date.now();
      o.log.warn('WAL archiving failed; trying again', { cause: e });
    });
    return r;
  };

  const timer = setInterval(() => {
    if (stopped || busy) return;
    busy = true;
    run(false)
      .catch(() => {}) // logged by `run`
      .finally(() => (busy = false));
  }, TICK_MS);
  timer.unref();
  o.log.info('WAL archiving', { dir, timeline: tli, from: name(next) });

  return {
    flush: () => run(true),
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await run(true).catch(() => {}); // logged by `run`
      o.wal.beforeSegmentGone = undefined;
    },
  };
}
