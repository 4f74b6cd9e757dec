/**
 * Point-in-time restore of the embedded engine (docs/backup.md, "Point-in-time restore"), on
 * the executable where scripts/test.ts runs it there: rows written over HTTP with the times
 * around their commits, the WAL archived by `serve` (`backup.wal_flush_seconds` = 1), then
 * `basalt restore --to-latest` holds every row and `basalt restore --to T` (T between two
 * commits) exactly those committed before T; a damaged or missing segment of the archive is
 * named and nothing is changed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { freshDb, type FreshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { runCli } from '../helpers/cli';
import { eventually } from '../helpers/wait';
import { query } from '../database/fixtures';

const MIGRATIONS = {
  '001_events.sql': 'CREATE TABLE public.events (id int PRIMARY KEY, note text NOT NULL);',
  '002_later.sql': 'CREATE TABLE public.later (id int PRIMARY KEY);',
};
/** Each row carries this much incompressible text, so the rows fill more than one 16 MiB WAL segment. */
const NOTE_BYTES = 800_000;
const ROWS = 24;

describe('point-in-time restore of the embedded engine', () => {
  let db: FreshDb;
  let s: TestServer | undefined;
  let key = '';
  const env = () => ({ ...db.env, BASALT_BACKUP_WAL_FLUSH_SECONDS: '1' });
  /** For each row: a moment before its request and one after its answer (its commit is between). */
  const times: { id: number; before: number; after: number }[] = [];
  const walDir = () => join(db.dataDir, 'backups', 'wal');
  const start = async () => {
    s = await startServer('embedded', { db, migrations: MIGRATIONS, env: { BASALT_BACKUP_WAL_FLUSH_SECONDS: '1' } });
    // Made before the base backup: every restored copy holds it (and its administrator).
    key ||= await createKey(s, { type: 'service', permissions: ['db:query'], tables: ['events', 'later'] });
  };
  const ids = async () => {
    const r = await query(s!, key, {
      entity: 'events',
      action: 'select',
      fields: ['id'],
      sort: [{ field: 'id', direction: 'asc' }],
      limit: 1000,
    });
    expect(r.status).toBe(200);
    return (r.body.data.rows as { id: number }[]).map((x) => x.id);
  };
  /** The data dirs kept beside by restores. */
  const kept = () =>
    readdirSync(dirname(db.dataDir)).filter((f) => f.startsWith(`${basename(db.dataDir)}.before-restore-`));
  const stop = async () => {
    await s?.stop();
    s = undefined;
  };

  beforeAll(async () => {
    db = await freshDb('embedded');
    await start();
    // The base backup, through the running server (management socket).
    const b = await runCli(['backup'], env());
    expect(b.stderr).toBe('');
    expect(b.code).toBe(0);
    for (let id = 1; id <= ROWS; id++) {
      const before = Date.now();
      const note = Array.from({ length: NOTE_BYTES / 32 }, () => crypto.randomUUID().replace(/-/g, '')).join('');
      const r = await query(s!, key, { entity: 'events', action: 'insert', data: { id, note } });
      expect(r.status).toBe(200);
      times.push({ id, before, after: Date.now() });
      await Bun.sleep(250);
    }
    // The archive holds the last commit once a partial copy is written after its answer.
    const last = times.at(-1)!.after;
    await eventually(
      () => readdirSync(walDir()).some((f) => f.endsWith('.partial') && statSync(join(walDir(), f)).mtimeMs > last),
      { timeout: 20_000, what: 'the WAL archive to reach the last commit' },
    );
    await stop();
  }, 180_000);
  afterAll(async () => {
    await stop();
    if (db) for (const f of kept()) rmSync(join(dirname(db.dataDir), f), { recursive: true, force: true });
    await db?.drop();
  });

  test('the archive holds whole segments with checksums and the current one as .partial', () => {
    const files = readdirSync(walDir());
    const whole = files.filter((f) => /^[0-9A-F]{24}$/.test(f));
    expect(whole.length).toBeGreaterThanOrEqual(1); // ~19 MB of rows: at least one segment completed
    for (const f of whole) expect(files).toContain(`${f}.sha256`);
    expect(files.some((f) => /^[0-9A-F]{24}\.partial$/.test(f))).toBe(true);
  });

  test('a damaged or missing segment is named, and nothing is changed', async () => {
    const whole = readdirSync(walDir())
      .filter((f) => /^[0-9A-F]{24}$/.test(f))
      .sort();
    const victim = join(walDir(), whole.at(-1)!); // after the base backup: in every restore's chain
    const original = readFileSync(victim);
    const damaged = Buffer.from(original);
    damaged[1000] = damaged[1000]! ^ 0xff;
    writeFileSync(victim, damaged);
    const bad = await runCli(['restore', '--to-latest'], env());
    writeFileSync(victim, original);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(whole.at(-1)!);
    expect(bad.stderr).toContain('does not match its checksum');
    expect(bad.stderr).toContain('nothing was changed');

    renameSync(victim, `${victim}.away`);
    const gone = await runCli(['restore', '--to-latest'], env());
    renameSync(`${victim}.away`, victim);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain(`lacks segment ${whole.at(-1)}`);
    expect(kept()).toEqual([]);
  }, 120_000);

  test('--to-latest holds every row committed', async () => {
    const r = await runCli(['restore', '--to-latest'], env(), { timeoutMs: 110_000 });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('restored the latest state archived');
    await start();
    expect(await ids()).toEqual(times.map((t) => t.id));
    await stop();
  }, 120_000);

  test('--to a moment between two commits holds exactly the rows committed before it', async () => {
    const k = 13; // rows 1..13 committed before the target, 14.. after
    const target = new Date(Math.floor((times[k - 1]!.after + times[k]!.before) / 2));
    expect(times[k - 1]!.after).toBeLessThan(target.getTime());
    expect(times[k]!.before).toBeGreaterThan(target.getTime());
    const r = await runCli(['restore', '--to', target.toISOString()], env(), { timeoutMs: 110_000 });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(target.toISOString());
    expect(r.stdout).toContain('recovery stopping before commit');
    await start();
    expect(await ids()).toEqual(times.slice(0, k).map((t) => t.id));
    await stop();
    // The data before each restore is kept beside it.
    expect(kept().length).toBe(2);
    expect(existsSync(join(db.dataDir, 'backups', 'wal'))).toBe(true);
  }, 120_000);

  test('--before-migration undoes a bad migration, following the timelines of the restores before', async () => {
    s = await startServer('embedded', {
      db,
      migrations: { ...MIGRATIONS, '003_bad.sql': 'DELETE FROM public.events;' },
      env: { BASALT_BACKUP_WAL_FLUSH_SECONDS: '1' },
    });
    expect(await ids()).toEqual([]);
    await stop();
    const r = await runCli(['restore', '--before-migration', '003_bad.sql'], env(), { timeoutMs: 110_000 });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    await start();
    expect(await ids()).toEqual(times.slice(0, 13).map((t) => t.id));
    await stop();
    const unknown = await runCli(['restore', '--before-migration', '999_never.sql'], env());
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('migration 999_never.sql was never applied here');
  }, 120_000);

  test('refusals: a time with no zone, a moment before every base backup', async () => {
    const noZone = await runCli(['restore', '--to', '2026-01-01T00:00:00'], env());
    expect(noZone.code).not.toBe(0);
    expect(noZone.stderr).toContain('--to takes a time with its zone');
    const early = await runCli(['restore', '--to', '2000-01-01T00:00:00Z'], env());
    expect(early.code).toBe(1);
    expect(early.stderr).toContain('before the oldest base backup');
  });
});
