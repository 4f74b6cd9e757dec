/**
 * Private by default: whatever umask the executable is started with, everything under the
 * data dir is its user's alone, and a data dir left world-readable (an older version, a
 * copy, an upload stored under umask 022) is narrowed at start with a log line saying so
 * (docs/operations.md, "File modes").
 */
import { describe, expect, test } from 'bun:test';
import { chmodSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, runBinary } from '../helpers/binary';
import { eventually } from '../helpers/wait';
import { dbQuery, preparedInstance } from './support';

/** Every path under `dir` (itself included) whose mode lets group or others in. */
function open(dir: string): string[] {
  const found: string[] = [];
  const visit = (p: string) => {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return;
    if (st.mode & 0o077) found.push(`${p} ${(st.mode & 0o7777).toString(8)}`);
    if (st.isDirectory()) for (const n of readdirSync(p)) visit(join(p, n));
  };
  visit(dir);
  return found;
}

function widen(dir: string): void {
  for (const n of readdirSync(dir, { recursive: true }) as string[]) {
    const p = join(dir, n);
    chmodSync(p, lstatSync(p).isDirectory() ? 0o755 : 0o644);
  }
  chmodSync(dir, 0o755);
}

describe('file modes of the executable under umask 022', () => {
  test('a wide data dir is narrowed at start (logged); what the server creates is 0600/0700', async () => {
    const { dir, exe, data, key } = await preparedInstance();
    // An upload stored by an older version, as the Files extension lays them out.
    const uploads = join(data, 'extensions', 'media-library', 'files', 'ab');
    mkdirSync(uploads, { recursive: true });
    writeFileSync(join(uploads, 'ab12'), 'private upload');
    widen(data);
    expect(open(data).length).toBeGreaterThan(100);

    const port = await freePort();
    const proc = Bun.spawn(['sh', '-c', 'umask 022; exec ./basalt serve'], {
      cwd: dir,
      env: { PATH: '/usr/bin:/bin', HOME: dir, BASALT_WEB_PORT: String(port) },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const url = `http://127.0.0.1:${port}`;
    try {
      await eventually(
        () =>
          fetch(url + '/readyz').then(
            (r) => r.ok,
            () => false,
          ),
        { timeout: 90_000, interval: 100 },
      );
      // Writes: WAL, relation files; a backup archive; the management socket.
      for (let i = 0; i < 5; i++)
        expect((await dbQuery(url, key, { action: 'insert', data: { body: `m${i}` } })).status).toBe(200);
      const backup = await runBinary(exe, ['backup'], dir);
      expect(backup.code).toBe(0);
      expect(open(data)).toEqual([]);
    } finally {
      proc.kill('SIGTERM');
    }
    expect(await proc.exited).toBe(0);
    const out = (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text());
    const line = out.split('\n').find((l) => l.includes('narrowed file modes'));
    expect(line).toBeDefined();
    const logged = JSON.parse(line!) as { count: number; examples: string[] };
    expect(logged.count).toBeGreaterThan(100);
    expect(logged.examples[0]).toContain('(was 0755)');
    expect(open(data)).toEqual([]);
  }, 300_000);
});
