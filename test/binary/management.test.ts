/**
 * Managing a running instance on the embedded engine: while `basalt serve` holds the
 * data dir, other commands of the compiled executable run inside it over the
 * owner-only management socket (docs/operations.md), instead of failing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { installBinary, runBinary, serveBinary } from '../helpers/binary';
import { eventually } from '../helpers/wait';

describe('commands beside a running embedded server', () => {
  let dir: string;
  let exe: string;
  let server: Awaited<ReturnType<typeof serveBinary>>;
  const env = { BASALT_LOG_LEVEL: 'warn' };
  const sock = () => join(dir, 'basalt_data', 'basalt.sock');

  beforeAll(async () => {
    ({ dir, exe } = await installBinary());
    server = await serveBinary(exe, dir, env);
  }, 120_000);
  afterAll(() => {
    server?.proc.kill('SIGKILL');
  });

  test('the socket is in the data dir and only its owner can open it', async () => {
    // It opens right after the listeners.
    await eventually(() => existsSync(sock()), { timeout: 5000, interval: 50, what: 'the management socket' });
    expect(existsSync(sock())).toBe(true);
    expect(statSync(sock()).mode & 0o777).toBe(0o600);
  });

  test('keys create runs inside the server, and the key works on its API at once', async () => {
    const r = await runBinary(
      exe,
      ['keys', 'create', '--type', 'service', '--service', 'ops', '--permissions', 'mail:send', '--json'],
      dir,
      env,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const created = JSON.parse(r.stdout) as { id: string; key: string };
    expect(created.key).toStartWith('sk_');
    // Accepted (mail is not configured, so 503 — not the 401 of an unknown key).
    const send = await fetch(server.url + '/api/v1/mail/send', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': created.key },
      body: JSON.stringify({ to: ['ada@example.com'], subject: 's', text: 't' }),
    });
    expect(send.status).toBe(503);
    const list = await runBinary(exe, ['keys', 'list', '--json'], dir, env);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as { id: string }[]).map((k) => k.id)).toContain(created.id);
  });

  test('settings set is live in the server that ran it', async () => {
    const set = await runBinary(exe, ['settings', 'set', 'web.cors_origins', 'https://app.example'], dir, env);
    expect(set.code).toBe(0);
    const res = await fetch(server.url + '/healthz', { headers: { origin: 'https://app.example' } });
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
    const get = await runBinary(exe, ['settings', 'get', 'web.cors_origins'], dir, env);
    expect(get.stdout).toContain('https://app.example');
    expect(get.stdout).toContain('database');
  });

  test('usage errors come back with their exit code', async () => {
    const r = await runBinary(exe, ['keys', 'create', '--type', 'secret'], dir, env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--type must be public or service');
    expect(r.stderr).toContain('usage: basalt keys create');
  });

  test('after SIGTERM the socket is gone and commands open the data dir themselves', async () => {
    server.proc.kill('SIGTERM');
    expect(await server.proc.exited).toBe(0);
    expect(existsSync(sock())).toBe(false);
    const list = await runBinary(exe, ['keys', 'list', '--json'], dir, env);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout)).toHaveLength(1);
  });
});
