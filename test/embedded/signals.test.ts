/**
 * SIGTERM is a graceful stop from the moment `serve` starts opening anything: right after
 * the server is ready, and while it is still starting (docs/operations.md, "Shutdown").
 * On the compiled executable, several times over, since the old failure was a race.
 */
import { describe, expect, test } from 'bun:test';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { bareEnv, freePort, serveBinary } from '../helpers/binary';
import { eventually } from '../helpers/wait';
import { preparedInstance } from './support';

const RUNS = 4;

describe('SIGTERM on the executable', () => {
  test(`50 ms after ready: exit 0 with a graceful stop, ${RUNS} times`, async () => {
    const { dir, exe } = await preparedInstance();
    for (let i = 0; i < RUNS; i++) {
      const server = await serveBinary(exe, dir, {});
      await Bun.sleep(50);
      server.proc.kill('SIGTERM');
      const code = await server.proc.exited;
      const out = await server.output();
      expect({ run: i, code }).toEqual({ run: i, code: 0 });
      expect(out).toContain('"msg":"shutting down","signal":"SIGTERM"');
      expect(existsSync(join(dir, 'basalt_data', 'basalt.lock'))).toBe(false);
    }
  }, 400_000);

  test(`while starting (the data dir just locked): exit 0, lock released, ${RUNS} times`, async () => {
    const { dir, exe } = await preparedInstance();
    const lock = join(dir, 'basalt_data', 'basalt.lock');
    for (let i = 0; i < RUNS; i++) {
      const proc = Bun.spawn([exe, 'serve'], {
        cwd: dir,
        env: bareEnv(dir, { BASALT_WEB_PORT: String(await freePort()) }),
        stdout: 'pipe',
        stderr: 'pipe',
      });
      // The lock is taken as the database opens: the server is mid-start, not yet listening.
      await eventually(() => existsSync(lock) || proc.exitCode !== null, { timeout: 60_000, interval: 5 });
      proc.kill('SIGTERM');
      const code = await proc.exited;
      const out = (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text());
      expect({ run: i, code }).toEqual({ run: i, code: 0 });
      expect(out).toContain('"msg":"shutting down"');
      expect(existsSync(lock)).toBe(false);
    }
  }, 400_000);
});
