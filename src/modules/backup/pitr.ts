/**
 * Point-in-time restore of the embedded engine (docs/backup.md, "Point-in-time restore";
 * docs/architecture.md, "Point-in-time restore of the embedded engine").
 *
 * PostgreSQL does it: a base backup (a Basalt backup whose manifest records its place in the
 * WAL) is unpacked, `recovery.signal` is put in it, and the engine is started with
 * `recovery_target_time` (or none: to the end of the archive), `recovery_target_inclusive=off`,
 * `recovery_target_action=promote` and a `restore_command` that PostgreSQL runs through
 * `system()`; Basalt answers it in JavaScript (src/db/embedded-fs.ts) from the WAL archive
 * (src/modules/backup/wal-archive.ts). PostgreSQL replays every transaction committed before
 * the target and stops at the first commit at or after it, then opens a new timeline.
 *
 * Before a byte is written, the archive is checked: every segment from the base backup's start
 * to the target present and matching its checksum; a missing or damaged one is named.
 */
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { archivesIn, type Manifest } from './service';
import { listArchived, parseSegment, recordedHash, segmentName, sha256, type ArchivedFile } from './wal-archive';

/** A restore refused or failed; the message is one line, and nothing was changed. */
export class PitrError extends Error {}

export type PitrTarget = { kind: 'time'; at: Date } | { kind: 'latest' } | { kind: 'migration'; name: string };

export type WalPlace = NonNullable<Manifest['wal']>;
export interface Base {
  name: string;
  path: string;
  manifest: Manifest & { wal: WalPlace };
}

/** Local archives a point-in-time restore can start from (their manifest records a WAL place), oldest first. */
export async function pitrBases(backupsDir: string): Promise<Base[]> {
  const out: Base[] = [];
  for await (const { name, path, manifest: m } of archivesIn(backupsDir)) {
    if (m?.wal?.snapshot_at && m.wal.start) out.push({ name, path, manifest: m as Base['manifest'] });
  }
  return out.sort((a, b) => (a.manifest.wal.snapshot_at < b.manifest.wal.snapshot_at ? -1 : 1));
}

const at = (b: Base) => new Date(b.manifest.wal.snapshot_at);

/** The newest base whose snapshot is at or before `target` (the newest of all for `latest`). */
export function chooseBase(bases: Base[], target: Date | 'latest'): Base {
  if (!bases.length)
    throw new PitrError(
      'no backup to start from: a point-in-time restore needs a base backup made with WAL archiving on (basalt backup, or backup.schedule)',
    );
  const base = target === 'latest' ? bases.at(-1) : bases.filter((b) => at(b) <= target).at(-1);
  if (!base)
    throw new PitrError(
      `${target === 'latest' ? '' : target.toISOString()} is before the oldest base backup (${bases[0]!.name}, taken ${bases[0]!.manifest.wal.snapshot_at}): it cannot be restored`,
    );
  return base;
}

/** The newest moment the archive holds: when its newest file was written. */
function archiveEnd(files: ArchivedFile[]): Date | undefined {
  let end: Date | undefined;
  for (const f of files) if (f.segment && (!end || f.mtime > end)) end = f.mtime;
  return end;
}

/** The span a restore can reach: from the oldest base backup's snapshot to the newest WAL archived. */
export async function restorableWindow(
  backupsDir: string,
  walDir: string,
): Promise<{ from: string; to: string; bases: number } | null> {
  const bases = await pitrBases(backupsDir);
  if (!bases.length) return null;
  const end = archiveEnd(listArchived(walDir, bases[0]!.manifest.wal.segment_size));
  const from = bases[0]!.manifest.wal.snapshot_at;
  const newestBase = bases.at(-1)!.manifest.wal.snapshot_at;
  const to = end && end.toISOString() > newestBase ? end.toISOString() : newestBase;
  return { from, to, bases: bases.length };
}

/**
 * The archive holds, whole and unaltered, every segment from `base`'s start up to the first
 * one written at or after `target` (all of them for `latest`). Throws naming the first segment
 * missing, or a file whose checksum does not match. Returns the moment the archive reaches.
 *
 * `serving`: the early check of a serving process (the admin API's restore request), whose WAL
 * up to now is still to be archived, at the latest when it stops, before the restore runs: the
 * archive may end before `target` and lack the segments after its newest, but not one between;
 * presence only, as hashing a week of WAL would hold the event loop (the restore checks every byte).
 */
export function checkWalChain(
  walDir: string,
  wal: WalPlace,
  target: Date | 'latest',
  opts: { serving?: boolean } = {},
): Date {
  const size = wal.segment_size;
  const files = listArchived(walDir, size);
  const end = archiveEnd(files);
  const start = parseSegment(wal.start, size);
  if (!start) throw new PitrError(`the base backup names no valid WAL segment (${wal.start}); it is damaged`);
  if (!opts.serving && target !== 'latest' && (!end || end < target))
    throw new PitrError(
      `the WAL archive in ${walDir} reaches only to ${end?.toISOString() ?? 'nothing'}${end ? '' : ' (it is empty)'}, before ${target.toISOString()}: that moment cannot be restored`,
    );
  const bySegno = new Map<number, ArchivedFile[]>();
  for (const f of files) if (f.segment) bySegno.set(f.segment.segno, [...(bySegno.get(f.segment.segno) ?? []), f]);
  const last = Math.max(start.segno, ...bySegno.keys());
  for (let segno = start.segno; segno <= last; segno++) {
    const here = bySegno.get(segno);
    // Past the newest segment archived (`last` is then the base's own start): still in pg_wal.
    if (!here?.length && opts.serving && segno === last && !bySegno.has(last)) break;
    if (!here?.length)
      throw new PitrError(
        `the WAL archive in ${walDir} lacks segment ${segmentName(wal.timeline, segno, size)} (needed from the base backup's ${wal.start} on): the WAL after it cannot be replayed`,
      );
    for (const f of opts.serving ? [] : here) {
      const want = recordedHash(f.path);
      if (!want)
        throw new PitrError(`${f.path} has no checksum (${f.name}.sha256) in the WAL archive; it cannot be checked`);
      if (sha256(readFileSync(f.path)) !== want)
        throw new PitrError(`${f.path} does not match its checksum (${f.name}.sha256): the WAL archive is damaged`);
    }
    // Far enough: this segment was archived at or after the target, so it holds the WAL up to it.
    if (target !== 'latest' && here.some((f) => f.mtime >= target)) break;
  }
  return end ?? new Date(wal.snapshot_at);
}

const RESTORE_COMMAND = 'basalt-wal %f %p';

/** What a recovery did, from PostgreSQL's log. */
export interface Recovered {
  /** PostgreSQL's own line about where it stopped (or that it replayed all). */
  stop: string;
  /** Segments PostgreSQL asked for that the archive did not have (past its end, normally). */
  notFound: string[];
}

/**
 * Replay the WAL archive into the unpacked cluster `pgDir` up to `target` and open it on a new
 * timeline. `open` opens the engine (src/db/embedded.ts, with `recovery`).
 */
export async function recover(
  pgDir: string,
  walDir: string,
  wal: WalPlace,
  target: Date | 'latest',
  open: (
    dir: string,
    recovery: { params: string[]; system: (command: string) => number; log: (line: string) => void },
  ) => Promise<{ close(): Promise<void> }>,
): Promise<Recovered> {
  const size = wal.segment_size;
  const notFound: string[] = [];
  const log: string[] = [];
  /** `restore_command`: copy the file PostgreSQL asks for from the archive (a partial one padded to a segment). */
  const system = (command: string): number => {
    const m = /^basalt-wal ([0-9A-Za-z.]+) (\S+)$/.exec(command);
    if (!m || m[2]!.includes('..')) return 127 << 8;
    const [, file, rel] = m;
    const dest = join(pgDir, rel!);
    try {
      const whole = join(walDir, file!);
      if (existsSync(whole)) {
        copyFileSync(whole, dest);
        return 0;
      }
      const partial = join(walDir, `${file}.partial`);
      if (existsSync(partial)) {
        const bytes = readFileSync(partial);
        const padded = new Uint8Array(size);
        padded.set(bytes.subarray(0, size));
        writeFileSync(dest, padded, { mode: 0o600 });
        return 0;
      }
    } catch {
      return 2 << 8;
    }
    notFound.push(file!);
    return 1 << 8;
  };
  const base = [
    '-c',
    `restore_command=${RESTORE_COMMAND}`,
    '-c',
    'recovery_target_action=promote',
    '-c',
    'recovery_target_timeline=latest',
    // Hot standby would set up a second backend's shared-invalidation slot in the one process
    // ("sinval slot for backend 0 is already in use"); a single-user engine serves no reads meanwhile.
    '-c',
    'hot_standby=off',
    '-c',
    'log_min_messages=log',
  ];
  const timed =
    target === 'latest' ? [] : ['-c', `recovery_target_time=${pgTime(target)}`, '-c', 'recovery_target_inclusive=off'];
  const attempt = async (params: string[]) => {
    writeFileSync(join(pgDir, 'recovery.signal'), '', { mode: 0o600 });
    const db = await open(pgDir, { params, system, log: (line) => void log.push(line) });
    await db.close();
    if (existsSync(join(pgDir, 'recovery.signal')))
      throw new PitrError('PostgreSQL opened the restored copy without finishing its recovery; not restored');
  };
  try {
    await attempt([...base, ...timed]);
  } catch (e) {
    // No commit after the target in the archive (a quiet moment before its end): PostgreSQL
    // wants to see one to stop before; the archive was checked to reach past the target, so
    // replaying all of it is the state at the target.
    if (timed.length && log.some((l) => l.includes('recovery ended before configured recovery target was reached')))
      await attempt(base);
    else throw failure(e, log, notFound);
  }
  const stop =
    log.find((l) => /recovery stopping before/.test(l)) ??
    log.find((l) => /redo done at|last completed transaction/.test(l)) ??
    'replayed the whole archive';
  return { stop: stop.replace(/^.*?(LOG|FATAL):\s*/, ''), notFound };
}

/** A failed recovery as one line: PostgreSQL's FATAL, and the segment it was missing when it ended early. */
function failure(e: unknown, log: string[], notFound: string[]): PitrError {
  if (e instanceof PitrError) return e;
  const fatal = log.find((l) => /FATAL|PANIC/.test(l))?.replace(/^.*?(FATAL|PANIC):\s*/, '');
  const lacking = notFound.filter((f) => /^[0-9A-F]{24}$/.test(f)).at(-1);
  return new PitrError(
    `PostgreSQL's recovery failed: ${fatal ?? (e as Error).message.split('\n')[0]}${lacking ? ` (the WAL archive had no ${lacking})` : ''}; not restored`,
  );
}

/**
 * A time as `recovery_target_time` reads it at start-up: a numeric zone, since time-zone
 * abbreviations (`Z` among them) are not loaded yet when the setting is checked.
 */
export function pgTime(at: Date): string {
  return at.toISOString().replace('T', ' ').replace('Z', '+00');
}
