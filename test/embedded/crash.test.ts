/**
 * Nothing acknowledged is lost on the embedded engine under `full` (docs/operations.md,
 * "Durability"), on the compiled executable, with 16 clients inserting at once:
 * - SIGKILL: the process dies mid-load; after a restart every acknowledged row is there.
 * - A power cut: the server runs under `strace`, which records every write and sync of the data
 *   dir; the cut's disk is the data dir as it was before the run plus only the writes a later
 *   sync of the same file made durable (what an OS crash may keep at the least; everything
 *   unsynced is dropped). The server started on that disk recovers and has every row
 *   acknowledged before the cut. Under `normal`, which acknowledges before syncing, the same
 *   cut loses acknowledged rows: the check can fail.
 * The power cut ends the traced server with SIGKILL, so under `full` its own data dir is the
 * SIGKILL case too (checked there, beside the cut's disk); without strace, SIGKILL is a test alone.
 */
import { describe, expect, test } from 'bun:test';
import { closeSync, cpSync, existsSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { bareEnv, freePort, serveBinary, untilHealthy } from '../helpers/binary';
import { eventually } from '../helpers/wait';
import { dbQuery, preparedInstance } from './support';
import { hasStrace, isSync, parseTrace, pwriteOf, straceArgs } from './trace';

const CLIENTS = 16;
type Sync = 'full' | 'normal';
const envOf = (sync: Sync) => ({ BASALT_LOG_LEVEL: 'warn', BASALT_DATABASE_EMBEDDED_SYNC: sync });

/** CLIENTS clients inserting rows one after another until `stop()`; `acked`: the bodies answered 200. */
function load(url: string, key: string) {
  const acked = new Set<string>();
  let stopped = false;
  const clients = Array.from({ length: CLIENTS }, async (_, c) => {
    for (let i = 0; !stopped; i++) {
      const body = `c${c}r${i}`;
      const r = await dbQuery(url, key, { action: 'insert', data: { body } }).catch(() => undefined);
      if (!r) return; // the server has gone
      if (r.status === 200) acked.add(body);
      await r.body?.cancel();
    }
  });
  return {
    acked,
    stop: async () => {
      stopped = true;
      await Promise.all(clients);
    },
  };
}

/** Every body in `notes` on the server at `url`. */
async function bodies(url: string, key: string): Promise<Set<string>> {
  const out = new Set<string>();
  for (let offset = 0; ; offset += 1000) {
    const r = await dbQuery(url, key, {
      action: 'select',
      fields: ['body'],
      sort: [{ field: 'id' }],
      limit: 1000,
      offset,
    });
    expect(r.status).toBe(200);
    const rows = ((await r.json()) as { data: { rows: { body: string }[] } }).data.rows;
    for (const row of rows) out.add(row.body);
    if (rows.length < 1000) return out;
  }
}

/** Start the server on `data`, read its rows, stop it; the acknowledged bodies it lacks. */
async function lostFrom(exe: string, dir: string, data: string, key: string, acked: Set<string>): Promise<string[]> {
  const server = await serveBinary(exe, dir, { ...envOf('full'), BASALT_DATA_DIR: data });
  try {
    const present = await bodies(server.url, key);
    return [...acked].filter((b) => !present.has(b));
  } finally {
    server.proc.kill('SIGTERM');
    await server.proc.exited;
  }
}

describe('embedded engine, full: a crash loses nothing acknowledged', () => {
  test.skipIf(hasStrace)(
    'SIGKILL under load',
    async () => {
      const { dir, exe, data, key } = await preparedInstance();
      const server = await serveBinary(exe, dir, envOf('full'));
      const l = load(server.url, key);
      await eventually(() => l.acked.size >= 200, { timeout: 120_000, what: '200 acknowledged inserts' });
      server.proc.kill('SIGKILL');
      await server.proc.exited;
      await l.stop();
      expect(await lostFrom(exe, dir, data, key, l.acked)).toEqual([]);
    },
    300_000,
  );

  /**
   * A data dir after one clean run, so the cluster's files all exist and a traced run creates
   * none: made once, and copied over each cut's data dir.
   */
  let warmed: Promise<string> | undefined;
  const warmData = () =>
    (warmed ??= (async () => {
      const { dir, exe, data, key } = await preparedInstance();
      const warm = await serveBinary(exe, dir, envOf('full'));
      expect((await dbQuery(warm.url, key, { action: 'insert', data: { body: 'warm' } })).status).toBe(200);
      warm.proc.kill('SIGTERM');
      expect(await warm.proc.exited).toBe(0);
      return data;
    })());

  /**
   * Run the load under strace until `n` acknowledgements, SIGKILL, and build the power cut's
   * disk; the rows the cut lost, and those the SIGKILLed data dir itself lost.
   */
  async function powerCut(sync: Sync, n: number) {
    const { dir, exe, data, key } = await preparedInstance();
    rmSync(data, { recursive: true });
    cpSync(await warmData(), data, { recursive: true });
    const disk = join(dir, 'disk');
    cpSync(data, disk, { recursive: true });

    const out = join(dir, 'strace.txt');
    const port = await freePort();
    const tracer = Bun.spawn([...straceArgs(out), '--seccomp-bpf', '--', exe, 'serve'], {
      cwd: dir,
      env: bareEnv(dir, { ...envOf(sync), BASALT_WEB_PORT: String(port) }),
      stdin: 'ignore',
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const url = `http://127.0.0.1:${port}`;
    expect(await untilHealthy(tracer, url, 120_000)).toBe(true);
    const l = load(url, key);
    await eventually(() => l.acked.size >= n, { timeout: 120_000, what: `${n} acknowledged inserts` });
    const { pid } = JSON.parse(readFileSync(join(data, 'basalt.lock'), 'utf8')) as { pid: number };
    process.kill(pid, 'SIGKILL');
    await tracer.exited;
    await l.stop();

    // The disk after the cut: each write under pg/ kept only if a sync of its file started after it.
    const pg = join(data, 'pg');
    const calls = parseTrace(out);
    const syncs = calls.filter(isSync);
    let kept = 0;
    let dropped = 0;
    for (const c of calls) {
      if (!c.path?.startsWith(`${pg}/`) || c.result <= 0) continue;
      if (c.name !== 'pwrite64') throw new Error(`the cut models pwrite64 only: ${c.name} on ${c.path}`);
      if (!syncs.some((s) => s.path === c.path && s.start >= c.end)) {
        dropped++;
        continue;
      }
      const target = join(disk, 'pg', relative(pg, c.path));
      if (!existsSync(target)) {
        // What PostgreSQL makes anew at start-up (its pid file, relation-cache files): nothing recovery reads.
        if (/^(postmaster\.pid|pg_internal\.init)/.test(basename(c.path))) continue;
        throw new Error(`the cut does not model new files: ${c.path}`);
      }
      const { data: bytes, offset } = pwriteOf(c);
      const fd = openSync(target, 'r+');
      writeSync(fd, bytes, 0, bytes.length, offset);
      closeSync(fd);
      kept++;
    }
    expect(kept).toBeGreaterThan(0);
    // Under `full` the killed server's own data dir too (`normal` may lose there as well); both
    // servers at once, each on its own data dir and port.
    const [lost, killedLost] = await Promise.all([
      lostFrom(exe, dir, disk, key, l.acked),
      sync === 'full' ? lostFrom(exe, dir, data, key, l.acked) : [],
    ]);
    return { lost, killedLost, acked: l.acked.size, dropped };
  }

  test.skipIf(!hasStrace)(
    'SIGKILL and a power cut under load: only synced writes reach the disk',
    async () => {
      const cut = await powerCut('full', 60);
      expect(cut.killedLost).toEqual([]);
      expect(cut.lost).toEqual([]);
    },
    300_000,
  );

  test.skipIf(!hasStrace)(
    'normal acknowledges before syncing: the same cut loses acknowledged rows',
    async () => {
      const cut = await powerCut('normal', 60);
      expect(cut.lost.length).toBeGreaterThan(0);
    },
    300_000,
  );
});
