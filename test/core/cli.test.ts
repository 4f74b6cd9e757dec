import { describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pkg from '../../package.json';
import { ADMIN_URL, freshDb } from '../helpers/engines';
import { runCli } from '../helpers/cli';
import { startServer } from '../helpers/server';

/** Every fatal start-up problem is one line on stderr naming the key or cause, exit ≠ 0. */
function oneLine(stderr: string): string {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((l) => !l.startsWith('{'));
  expect(lines.length).toBe(1);
  return lines[0]!;
}

describe('basalt command line', () => {
  test('version and help', async () => {
    const v = await runCli(['version']);
    expect(v).toMatchObject({ code: 0, stdout: pkg.version + '\n' });
    const h = await runCli(['--help']);
    expect(h.code).toBe(0);
    for (const cmd of ['serve', 'migrate', 'settings get', 'settings set', 'version'])
      expect(h.stdout).toContain(`basalt ${cmd}`);
    const sub = await runCli(['settings', 'set', '--help']);
    expect(sub.stdout).toContain('usage: basalt settings set KEY VALUE');
    // A group's name with --help lists its commands (it used to say "unknown command 'admin'").
    const group = await runCli(['admin', '--help']);
    expect(group.code).toBe(0);
    for (const cmd of ['create', 'list', 'passwd', 'delete']) expect(group.stdout).toContain(`basalt admin ${cmd}`);
    const bare = await runCli(['keys']);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('basalt keys create');
  });

  test('unknown command and unknown flag are usage errors (exit 2)', async () => {
    const u = await runCli(['frobnicate']);
    expect(u.code).toBe(2);
    expect(u.stderr).toContain("unknown command 'frobnicate'");
    const f = await runCli(['version', '--verbose']);
    expect(f.code).toBe(2);
    expect(f.stderr).toContain('--verbose');
  });

  test('settings set / get / unset against the embedded database', async () => {
    const db = await freshDb('embedded');
    try {
      const set = await runCli(['settings', 'set', 'db.max_limit', '250'], db.env);
      expect(set).toMatchObject({ code: 0 });
      const get = await runCli(['settings', 'get', 'db.max_limit'], db.env);
      expect(get.stdout.trim()).toBe('db.max_limit = 250  (database)');
      const pinned = await runCli(['settings', 'get', 'db.max_limit'], { ...db.env, BASALT_DB_MAX_LIMIT: '300' });
      expect(pinned.stdout.trim()).toBe('db.max_limit = 300  (env: BASALT_DB_MAX_LIMIT)');
      const bad = await runCli(['settings', 'set', 'db.max_limit', 'lots'], db.env);
      expect(bad.code).toBe(1);
      expect(oneLine(bad.stderr)).toBe(
        'basalt: settings set: db.max_limit must be an integer from 1 to 100000, got "lots"',
      );
      const unknown = await runCli(['settings', 'get', 'db.maxlimit'], db.env);
      expect(unknown.code).toBe(1);
      expect(oneLine(unknown.stderr)).toContain("unknown setting 'db.maxlimit'");
      expect((await runCli(['settings', 'unset', 'db.max_limit'], db.env)).code).toBe(0);
      expect((await runCli(['settings', 'get', 'db.max_limit'], db.env)).stdout.trim()).toBe(
        'db.max_limit = 1000  (default)',
      );
    } finally {
      await db.drop();
    }
  });

  test('migrate applies operator migrations and reports them', async () => {
    const db = await freshDb('embedded');
    const dir = mkdtempSync(join(tmpdir(), 'basalt-cli-mig-'));
    writeFileSync(join(dir, '001_notes.sql'), 'CREATE TABLE notes (id serial PRIMARY KEY, body text)');
    try {
      const env = { ...db.env, BASALT_MIGRATIONS_DIR: dir };
      expect((await runCli(['migrate'], env)).stdout.trim()).toBe('applied: 001_notes.sql');
      expect((await runCli(['migrate'], env)).stdout.trim()).toBe('nothing to apply; the database is up to date');
      writeFileSync(join(dir, '002_broken.sql'), 'CREATE TABLE broken (');
      const bad = await runCli(['migrate'], env);
      expect(bad.code).toBe(1);
      expect(oneLine(bad.stderr)).toContain('002_broken.sql');
    } finally {
      await db.drop();
    }
  });

  const dir = mkdtempSync(join(tmpdir(), 'basalt-cli-'));
  const badToml = join(dir, 'bad.toml');
  writeFileSync(badToml, '[web]\nport = "high"\n');
  const fatal: [string, string[], Record<string, string>, RegExp][] = [
    [
      'bad value in the config file',
      ['serve', '--config', badToml],
      {},
      /^basalt: .*bad\.toml: web\.port must be an integer/,
    ],
    [
      'unknown environment variable',
      ['serve'],
      { BASALT_WEB_PORTT: '1' },
      /^basalt: environment: unknown variable BASALT_WEB_PORTT/,
    ],
    [
      'split listeners on one port',
      ['serve'],
      { BASALT_WEB_PUBLIC_API_SEPARATE: 'true', BASALT_WEB_PORT: '5077', BASALT_WEB_PUBLIC_PORT: '5077' },
      /^basalt: web\.public_port: must differ from web\.port \(both 5077\) when web\.public_api_separate is true$/,
    ],
    [
      'unreachable database',
      ['serve'],
      { BASALT_DATABASE_URL: 'postgres://nobody:pw@127.0.0.1:1/none' },
      /^basalt: database\.url: cannot connect to the database \(database unreachable \(ECONNREFUSED\)\)/,
    ],
  ];
  test.each(fatal)('%s → one line, exit 1', async (_n, args, env, line) => {
    const r = await runCli(args, { BASALT_DATA_DIR: join(dir, 'data'), ...env });
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toMatch(line);
    expect(r.stderr).not.toContain(':pw@');
  });

  test('port in use → one line naming web.port', async () => {
    const s = await startServer('embedded');
    const db = await freshDb('embedded');
    try {
      const port = new URL(s.url).port;
      // Opening the data dir comes first, and on the source under a loaded machine (CI's two
      // suites at a time) that and the shutdown after the refusal took up to a minute.
      const r = await runCli(['serve'], { ...db.env, BASALT_WEB_PORT: port }, { timeoutMs: 110_000 });
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toBe(
        `basalt: web.port: port ${port} on 127.0.0.1 is already in use; stop the other process or choose another port`,
      );
    } finally {
      await s.stop();
      await db.drop();
    }
  });

  test('a second process on a held embedded data dir fails fast naming the holder', async () => {
    const s = await startServer('embedded');
    try {
      const r = await runCli(['settings', 'get', 'web.port'], s.db.env);
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toBe(
        `basalt: the embedded database in ${s.db.dataDir} is in use by basalt process ${process.pid} on ${(await import('node:os')).hostname()} (started ${JSON.parse(await Bun.file(join(s.db.dataDir, 'basalt.lock')).text()).started}); stop it, or point this one at another data.dir or an external database.url`,
      );
    } finally {
      await s.stop();
    }
  });

  test.skipIf(!ADMIN_URL)('a missing external database is named', async () => {
    const u = new URL(ADMIN_URL);
    u.pathname = '/basalt_no_such_db';
    const r = await runCli(['serve'], { BASALT_DATABASE_URL: u.toString(), BASALT_DATA_DIR: join(dir, 'd2') });
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toMatch(/^basalt: database\.url: .*basalt_no_such_db.*does not exist; create it first/);
  });
});
