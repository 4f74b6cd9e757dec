/**
 * A full disk is an error, never a hang (docs/operations.md, "A full disk"): the
 * executable's embedded data dir on a small tmpfs, filled up under inserts and updates.
 * Every request is answered (503 `disk_full` in the area's envelope, `/readyz` saying so)
 * or, when PostgreSQL PANICs under a WAL write, the process ends at once with code 1 and
 * one log line; SIGTERM still stops a live one; with space freed, a restart has every
 * acknowledged row. Needs root (mount); skipped otherwise.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveBinary } from '../helpers/binary';
import { dbQuery, preparedInstance } from './support';

const MOUNT = mkdtempSync(join(tmpdir(), 'basalt-tmpfs-'));
const mounted = (() => {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=80m', 'tmpfs', MOUNT]);
    return true;
  } catch {
    return false;
  }
})();
afterAll(() => {
  if (mounted) execFileSync('umount', ['-l', MOUNT]);
  rmSync(MOUNT, { recursive: true, force: true });
});

const ANSWER_WITHIN_MS = 20_000;
const body = () => Buffer.from(crypto.getRandomValues(new Uint8Array(2000))).toString('hex');

type Outcome = { status: number; code?: string } | 'no-answer' | 'gone';

async function send(url: string, key: string, req: Record<string, unknown>): Promise<Outcome> {
  try {
    const r = await dbQuery(url, key, req).then(async (res) => {
      const j = (await res.json().catch(() => ({}))) as { error?: { code?: string } };
      return { status: res.status, code: j.error?.code };
    });
    return r;
  } catch (e) {
    return (e as Error).name === 'TimeoutError' ? 'no-answer' : 'gone';
  }
}

describe.skipIf(!mounted)('the embedded engine on a full disk (tmpfs), executable', () => {
  test('inserts and updates: answered with disk_full or a clean exit; data intact after restart', async () => {
    const data = join(MOUNT, 'data');
    mkdirSync(MOUNT, { recursive: true });
    const { dir, exe, key } = await preparedInstance(data);
    const env = { BASALT_DATA_DIR: data, BASALT_LOG_LEVEL: 'warn' };
    const server = await serveBinary(exe, dir, env);
    const acked = new Set<string>();
    const insert = async (text: string) => {
      const o = await Promise.race([
        send(server.url, key, { action: 'insert', data: { body: text } }),
        Bun.sleep(ANSWER_WITHIN_MS).then(() => 'no-answer' as const),
      ]);
      if (typeof o === 'object' && o.status === 200) acked.add(text);
      return o;
    };
    for (let i = 0; i < 20; i++) expect(await insert(`before-${i}`)).toEqual({ status: 200, code: undefined });

    // Leave about 1 MiB free.
    const fs = statfsSync(MOUNT);
    execFileSync('fallocate', ['-l', String(fs.bavail * fs.bsize - 1024 * 1024), join(MOUNT, 'filler')]);

    const outcomes: Outcome[] = [];
    let ready: { status: number; code?: string } | undefined;
    for (let i = 0; i < 400 && server.proc.exitCode === null; i++) {
      const o = await insert(body());
      outcomes.push(o);
      if (typeof o === 'object' && o.code === 'disk_full' && !ready) {
        const r = await fetch(server.url + '/readyz');
        ready = { status: r.status, code: ((await r.json()) as { error?: { code?: string } }).error?.code };
      }
    }
    // Updates: WAL grows while the table does not.
    for (let i = 0; i < 400 && server.proc.exitCode === null; i++) {
      const o = await Promise.race([
        // A new version of one of the first rows, same value.
        send(server.url, key, {
          action: 'update',
          filters: [{ field: 'id', op: 'eq', value: (i % 20) + 1 }],
          data: { body: `before-${i % 20}` },
        }),
        Bun.sleep(ANSWER_WITHIN_MS).then(() => 'no-answer' as const),
      ]);
      outcomes.push(o);
    }

    expect(outcomes).not.toContain('no-answer');
    const refused = outcomes.filter((o) => typeof o === 'object' && o.status !== 200);
    for (const o of refused) expect(o).toEqual({ status: 503, code: 'disk_full' });
    if (ready) expect(ready).toEqual({ status: 503, code: 'disk_full' });

    let output: string;
    if (server.proc.exitCode === null) {
      server.proc.kill('SIGTERM');
      const code = await Promise.race([server.proc.exited, Bun.sleep(60_000).then(() => 'hung')]);
      expect(code).not.toBe('hung');
      output = await server.output();
    } else {
      expect(server.proc.exitCode).toBe(1);
      output = await server.output();
      expect(output).toContain('"msg":"database stopped; exiting"');
      expect(output).toContain('No space left on device');
    }
    expect(refused.length + (server.proc.exitCode === 1 ? 1 : 0)).toBeGreaterThan(0);

    // Space freed: every acknowledged row is there, and writes work again.
    rmSync(join(MOUNT, 'filler'));
    const again = await serveBinary(exe, dir, env);
    try {
      const r = await dbQuery(again.url, key, { action: 'select', limit: 1000 });
      expect(r.status).toBe(200);
      const rows = ((await r.json()) as { data: { rows: { body: string }[] } }).data.rows.map((x) => x.body);
      for (const b of acked) expect(rows).toContain(b);
      expect((await dbQuery(again.url, key, { action: 'insert', data: { body: 'after' } })).status).toBe(200);
      expect((await (await fetch(again.url + '/readyz')).json()).data.status).toBe('ready');
    } finally {
      again.proc.kill('SIGTERM');
      expect(await again.proc.exited).toBe(0);
    }
    void output;
  }, 600_000);
});
