/**
 * `basalt keys create|list|revoke` (docs/api-keys.md). Runs the executable's command line
 * (test/helpers/cli.ts) against the executable (scripts/test.ts); what the commands left
 * is read by a platform opened on the database beside them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { runCli } from '../helpers/cli';
import { openBasalt } from '../../src/services';
import { eventually } from '../helpers/wait';

describe.each(ENGINES)('basalt keys (CLI) on %s', (engine) => {
  let db: FreshDb;
  const created: Record<string, any> = {};
  beforeAll(async () => {
    db = await freshDb(engine);
  }, 60_000);
  afterAll(() => db.drop());

  test('create --json prints the key once, with its id and attributes', async () => {
    const svc = await runCli(
      [
        'keys',
        'create',
        '--type',
        'service',
        '--service',
        'billing',
        '--permissions',
        'db:query,mail:send',
        '--tables',
        'orders,customers',
        '--name',
        'billing backend',
        '--json',
      ],
      db.env,
    );
    expect(svc.stderr).toBe('');
    expect(svc.code).toBe(0);
    created.service = JSON.parse(svc.stdout);
    expect(created.service).toMatchObject({
      type: 'service',
      service: 'billing',
      name: 'billing backend',
      permissions: ['db:query', 'mail:send'],
      tables: ['orders', 'customers'],
      status: 'active',
    });
    expect(created.service.key).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);

    const pub = await runCli(['keys', 'create', '--type', 'public', '--site', '--expires', '30d', '--json'], db.env);
    expect(pub.code).toBe(0);
    created.public = JSON.parse(pub.stdout);
    expect(created.public).toMatchObject({ type: 'public', site: true, permissions: [] });
    expect(created.public.key).toMatch(/^pk_/);
    const days = (new Date(created.public.expires_at).getTime() - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    expect(days).toBeLessThan(30.1);
  }, 60_000);

  test('list never shows a key; revoke stops it; the platform sees the result', async () => {
    const list = await runCli(['keys', 'list', '--json'], db.env);
    expect(list.code).toBe(0);
    for (const k of [created.service.key, created.public.key]) expect(list.stdout).not.toContain(k.slice(9, -4));
    const items = JSON.parse(list.stdout);
    expect(items.map((k: any) => k.id).sort()).toEqual([created.service.id, created.public.id].sort());

    const revoke = await runCli(['keys', 'revoke', created.service.id], db.env);
    expect(revoke.code).toBe(0);
    expect(revoke.stdout).toContain(`revoked service key ${created.service.id}`);

    const text = await runCli(['keys', 'list'], db.env);
    expect(text.stdout).toMatch(new RegExp(`${created.service.id}\\s+service\\s+\\S+\\s+revoked`));
    expect(text.stdout).toContain('site key');

    const p = await openBasalt({ env: { BASALT_LOG_LEVEL: 'silent', ...db.env }, migrate: false });
    try {
      expect(await p.services.keys.verify(created.service.key)).toBeNull();
      expect(await p.services.keys.verify(created.public.key)).toMatchObject({ id: created.public.id, type: 'public' });
      expect(p.settings.get('web.site_public_key')).toBe(created.public.key);
    } finally {
      await p.shutdown();
    }
  }, 60_000);
});

// Refusals do not depend on the engine; they run once, on the lighter engine available
// (a CLI process on external PostgreSQL starts without loading the embedded engine).
const REFUSAL_ENGINE = ENGINES.includes('external') ? 'external' : 'embedded';
describe(`basalt keys refusals (on ${REFUSAL_ENGINE})`, () => {
  let db: FreshDb;
  beforeAll(async () => {
    db = await freshDb(REFUSAL_ENGINE);
  }, 60_000);
  afterAll(() => db.drop());

  const refusals: [string, string[], number, RegExp][] = [
    ['no --type', ['keys', 'create'], 2, /--type must be public or service/],
    [
      'service key without --service',
      ['keys', 'create', '--type', 'service', '--permissions', 'mail:send'],
      1,
      /must name the service/,
    ],
    [
      'unknown permission',
      ['keys', 'create', '--type', 'service', '--service', 's', '--permissions', 'db:drop'],
      1,
      /Unknown permission 'db:drop'; allowed:/,
    ],
    [
      'db key without tables',
      ['keys', 'create', '--type', 'service', '--service', 's', '--permissions', 'db:*'],
      1,
      /non-empty table whitelist/,
    ],
    ['bad --expires', ['keys', 'create', '--type', 'public', '--expires', 'soon'], 2, /--expires 'soon' is neither/],
    ['revoke without id', ['keys', 'revoke'], 2, /needs the key ID/],
    ['revoke unknown id', ['keys', 'revoke', '00000000-0000-4000-8000-000000000000'], 1, /No API key with id/],
  ];
  test.each(refusals)(
    'refuses %s with a clear line and exit code',
    async (_n, args, code, message) => {
      const r = await runCli(args, db.env);
      expect(r.code).toBe(code);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe('');
    },
    60_000,
  );

  test('nothing was written by the refusals', async () => {
    const list = await runCli(['keys', 'list', '--json'], db.env);
    expect(JSON.parse(list.stdout)).toEqual([]);
  }, 60_000);
});

describe.if(ENGINES.includes('external'))('basalt keys alongside a running server (external)', () => {
  test('a key created and revoked from the command line is honoured by the server at once', async () => {
    const { startServer } = await import('../helpers/server');
    const s = await startServer('external');
    try {
      await s.settings.set('web.public_api_access_mode', 'api_key_required');
      const created = JSON.parse((await runCli(['keys', 'create', '--type', 'public', '--json'], s.db.env)).stdout);
      const rc = () => s.req('GET', '/api/v1/public/runtime-config', { headers: { 'x-api-key': created.key } });
      expect((await rc()).status).toBe(200);
      const revoke = await runCli(['keys', 'revoke', created.id], s.db.env);
      expect(revoke.code).toBe(0);
      await eventually(async () => (await rc()).status === 401, {
        timeout: 1000,
        interval: 20,
        what: 'the revoked key to be refused',
      });
    } finally {
      await s.stop();
    }
  }, 60_000);
});
