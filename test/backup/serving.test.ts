/**
 * `basalt backup` beside a running `basalt serve` (a separate process holding the data
 * dir) goes through the running instance over the management socket; `restore` never
 * does and is refused while the instance runs. docs/backup.md, docs/operations.md.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Subprocess } from 'bun';
import { MAIN, childEnv, runCli } from '../helpers/cli';
import { freePort } from '../helpers/binary';
import { eventually } from '../helpers/wait';

describe('backup while serve runs', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'basalt-backup-serve-'));
  let proc: Subprocess<'ignore', 'pipe', 'pipe'>;
  let url = '';
  const env = { BASALT_DATA_DIR: dataDir };

  beforeAll(async () => {
    const port = await freePort();
    proc = Bun.spawn([process.execPath, MAIN, 'serve'], {
      env: childEnv({ ...env, BASALT_WEB_PORT: String(port) }),
      stdin: 'ignore',
      stdout: 'pipe',
      stderr: 'pipe',
    });
    url = `http://127.0.0.1:${port}`;
    const started = performance.now();
    await eventually(
      () =>
        fetch(url + '/healthz').then(
          (r) => r.ok,
          () => false,
        ),
      { timeout: 120_000, interval: 100, what: 'serve to answer /healthz' },
    );
    // The socket appears right after the listeners.
    await eventually(() => existsSync(join(dataDir, 'basalt.sock')), {
      timeout: 60_000 - (performance.now() - started),
      interval: 50,
      what: 'the management socket',
    });
  });
  afterAll(async () => {
    proc?.kill('SIGTERM');
    await proc?.exited;
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('basalt backup, list and delete run inside the server; it keeps answering meanwhile', async () => {
    let answered = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        if ((await fetch(url + '/readyz')).status === 200) answered++;
        await Bun.sleep(20);
      }
    })();
    const r = await runCli(['backup'], env);
    polling = false;
    await poll;
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const path = r.stdout.split('\n')[0]!;
    expect(path).toMatch(
      new RegExp(`^${dataDir}/backups/basalt-\\d{4}-\\d\\d-\\d\\dT\\d\\d-\\d\\d-\\d\\dZ(-\\d+)?\\.tar\\.gz$`),
    );
    expect(existsSync(path)).toBe(true);
    expect(answered).toBeGreaterThan(0);
    // The server still holds its data dir: the command could only have run inside it.
    expect(existsSync(join(dataDir, 'basalt.lock'))).toBe(true);

    const name = path.split('/').pop()!;
    const list = await runCli(['backup', 'list', '--json'], env);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout).map((b: { name: string }) => b.name)).toEqual([name]);

    const refused = await runCli(['restore', name], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^basalt restore: the embedded database in .* is in use by basalt process \d+ .*; stop it first: restore needs the instance stopped; nothing was changed\n$/,
    );

    const del = await runCli(['backup', 'delete', name], env);
    expect(del).toMatchObject({ code: 0, stdout: `${name} deleted\n` });
    // Left beside the archives: the WAL archive (docs/backup.md, "Point-in-time restore").
    expect(readdirSync(join(dataDir, 'backups')).filter((f) => f !== 'wal')).toEqual([]);

    const bad = await runCli(['backup', 'delete', 'basalt-2001-01-01T00-00-00Z.tar.gz'], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('does not exist');
  });

  test('after the server stops, basalt backup works directly and restore is allowed', async () => {
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    const r = await runCli(['backup'], env);
    expect(r.code).toBe(0);
    const name = r.stdout.split('\n')[0]!.split('/').pop()!;
    const restored = await runCli(['restore', name], env);
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    expect(restored.stdout).toContain(`the previous data is kept in ${dataDir}.before-restore-`);
    const kept = readdirSync(join(dataDir, '..')).filter((n) =>
      n.startsWith(dataDir.split('/').pop()! + '.before-restore-'),
    );
    expect(kept.length).toBe(1);
    // The backups folder came along with the restored data.
    expect(readdirSync(join(dataDir, 'backups')).filter((f) => f !== 'wal')).toEqual([name]);
    rmSync(join(dataDir, '..', kept[0]!), { recursive: true, force: true });
    const keys = await runCli(['keys', 'list'], env);
    expect(keys.code).toBe(0);
  });
});

describe('the compiled executable', () => {
  test('backup through the running ./basalt serve, then restore after it stops', async () => {
    const { installBinary, runBinary, serveBinary } = await import('../helpers/binary');
    const { dir, exe } = await installBinary();
    try {
      const server = await serveBinary(exe, dir, { BASALT_LOG_LEVEL: 'warn' });
      let name = '';
      try {
        await eventually(() => existsSync(join(dir, 'basalt_data', 'basalt.sock')), {
          timeout: 30_000,
          interval: 50,
          what: 'the management socket',
        });
        const r = await runBinary(exe, ['backup'], dir);
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        name = r.stdout.split('\n')[0]!.split('/').pop()!;
        expect(name).toMatch(/^basalt-.*\.tar\.gz$/);
      } finally {
        server.proc.kill('SIGTERM');
        expect(await server.proc.exited).toBe(0);
      }
      const restored = await runBinary(exe, ['restore', name], dir);
      expect(restored.stderr).toBe('');
      expect(restored.code).toBe(0);
      expect(readdirSync(dir).filter((n) => n.startsWith('basalt_data.before-restore-')).length).toBe(1);
      expect((await runBinary(exe, ['keys', 'list'], dir)).code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
