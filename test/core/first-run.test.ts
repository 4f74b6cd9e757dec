/**
 * A newcomer's first run (README "Quick start"): `basalt --help` fits 100 columns; `serve`
 * says in plain words where the API, the reference and the admin panel are and how to get
 * a key; an expected 503 (mail not configured) is a warning without a stack, not an error.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { freshDb, type FreshDb } from '../helpers/engines';
import { childEnv, MAIN, runCli } from '../helpers/cli';
import { eventually } from '../helpers/wait';
import { freePort } from '../helpers/binary';

describe('first run', () => {
  test('--help and every command usage fit 100 columns', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('keys create');
    for (const line of help.stdout.split('\n')) expect(line.length, line).toBeLessThanOrEqual(100);
    const usage = await runCli(['keys', 'create', '--help']);
    expect(usage.stdout).toContain('--tables t1,t2');
    for (const line of usage.stdout.split('\n')) expect(line.length, line).toBeLessThanOrEqual(100);
  });

  describe('serve', () => {
    let db: FreshDb;
    let proc: ReturnType<typeof Bun.spawn>;
    let stderr = '';
    let base = '';
    beforeAll(async () => {
      db = await freshDb('embedded');
      // A port free now (a random one could be an outgoing connection's: the ranges overlap).
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      proc = Bun.spawn([process.execPath, MAIN, 'serve'], {
        env: childEnv({ ...db.env, BASALT_WEB_PORT: String(port), BASALT_LOG_LEVEL: 'info' }),
        stdout: 'ignore',
        stderr: 'pipe',
      });
      const reader = (proc.stderr as ReadableStream<Uint8Array>).getReader();
      void (async () => {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          stderr += new TextDecoder().decode(value);
        }
      })();
      // A server that stopped will never print it: fail at once, with what it said.
      const died = proc.exited.then((code) => {
        throw new Error(`basalt serve exited with ${code} before its banner:\n${stderr}`);
      });
      await Promise.race([
        eventually(() => stderr.includes('Stop with Ctrl-C'), {
          timeout: 50_000,
          interval: 50,
          what: 'the start-up banner',
        }),
        died,
      ]);
    }, 60_000);
    afterAll(async () => {
      proc?.kill('SIGTERM');
      await proc?.exited;
      await db?.drop();
    });

    test('prints where the API, the reference and the panel are, and how to get a key', () => {
      expect(stderr).toContain(`API:            ${base}/api/v1/`);
      expect(stderr).toContain(`API reference:  ${base}/api/docs`);
      expect(stderr).toContain(`Admin panel:    ${base}/_/`);
      expect(stderr).toContain('npx bun src/main.ts keys create --type service');
      // The admin setup link of a first start is still printed.
      expect(stderr).toContain('No administrator yet');
    });

    test('the reference and the panel answer at the printed addresses', async () => {
      expect((await fetch(`${base}/api/docs`)).status).toBe(200);
      expect((await fetch(`${base}/_/`)).status).toBe(200);
    });

    test('503 mail_not_configured is a warning naming the code, without a stack', async () => {
      const r = await fetch(`${base}/api/v1/auth/verify-email/resend`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"email":"ada@example.com"}',
      });
      expect(r.status).toBe(503);
      await Bun.sleep(200);
      const lines = stderr.split('\n').filter((l) => l.includes('mail_not_configured'));
      expect(lines.length).toBeGreaterThan(0);
      for (const l of lines) {
        const entry = JSON.parse(l);
        expect(entry.level).toBe('warn');
        expect(l).not.toContain('stack');
      }
    });
  });
});
