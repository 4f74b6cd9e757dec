/**
 * The extension loader: good, failing (import throws, setup throws, bad export) and
 * colliding extensions in temp dirs; the platform always starts, and the registry
 * says what happened, naming both sides of a collision.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { eventually } from '../helpers/wait';
import { cpSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINES, freshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { extensionsDir, REPO_EXTENSIONS, upload } from './support';
import { signInUser } from '../helpers/users';
import {
  BAD_MIGRATION,
  claimsFiles,
  DATA_READER,
  GOOD,
  GOOD_MIGRATION,
  IMPORT_THROWS,
  named,
  NOT_AN_EXTENSION,
  SETUP_HANGS,
  SETUP_THROWS,
} from './fixtures';
import { expectB, expectBError, expectCError } from '../helpers/envelopes';

const DIR = extensionsDir({
  'notes/index.ts': GOOD,
  'notes/migrations/001_notes.sql': GOOD_MIGRATION,
  'import-throws/index.ts': IMPORT_THROWS,
  'setup-throws/index.ts': SETUP_THROWS,
  'setup-hangs/index.ts': SETUP_HANGS,
  'not-an-extension/index.js': NOT_AN_EXTENSION,
  'twin-a/index.ts': named('twin'),
  'twin-b/index.ts': named('twin'),
  'files-one/index.ts': claimsFiles('files-one'),
  'files-two/index.ts': claimsFiles('files-two'),
  'just-a-folder/README.md': 'no index here',
  'bad-migration/index.ts': named('bad-migration'),
  'bad-migration/migrations/001_bad.sql': BAD_MIGRATION,
  'data-reader/index.ts': DATA_READER,
});

describe.each(ENGINES)('extension loader on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine, {
      env: { BASALT_EXTENSIONS_DIR: DIR, BASALT_EXT_NOTES_GREETING: 'Hi', BASALT_EXTENSIONS_SETUP_TIMEOUT_MS: '300' },
    });
  });
  afterAll(() => s.stop());

  test('the platform starts; each extension is loaded or failed with its error', () => {
    const byFolder = Object.fromEntries(
      s.platform.services.extensions.list().map((r) => [r.folder.split('/').pop(), r]),
    );
    expect(Object.keys(byFolder).sort()).toEqual([
      'bad-migration',
      'data-reader',
      'files-one',
      'files-two',
      'import-throws',
      'not-an-extension',
      'notes',
      'setup-hangs',
      'setup-throws',
      'twin-a',
      'twin-b',
    ]);
    expect(byFolder['data-reader']).toMatchObject({ status: 'loaded' });
    expect(byFolder.notes).toMatchObject({
      name: 'notes',
      version: '2.1.0',
      status: 'loaded',
      migrations: ['001_notes.sql'],
    });
    expect(byFolder.notes!.routes).toEqual([
      'GET /api/module/notes/greet/:who',
      'POST /api/module/notes/notes',
      'GET /api/module/notes/me',
      'GET /api/module/notes/boom',
    ]);
    const failures: [string, RegExp][] = [
      ['import-throws', /^import of .*import-throws\/index.ts failed: broken at import$/],
      ['setup-throws', /^setup failed: broken in setup$/],
      ['bad-migration', /^setup failed: migration .*bad-migration\/migrations\/001_bad.sql failed: .*no_such_function/],
      [
        'setup-hangs',
        /^setup failed: setup of extension hangs did not finish within 0.3 s \(extensions.setup_timeout_ms\)$/,
      ],
      ['not-an-extension', /name undefined is not valid/],
      ['twin-a', /^extension name twin is claimed by 'twin' \(.*twin-a\) and 'twin' \(.*twin-b\)/],
      ['twin-b', /^extension name twin is claimed by 'twin' \(.*twin-a\) and 'twin' \(.*twin-b\)/],
      ['files-one', /^prefix \/api\/v1\/files is claimed by 'files-one' \(.*\) and 'files-two' \(.*\)/],
      ['files-two', /^prefix \/api\/v1\/files is claimed by 'files-one' \(.*\) and 'files-two' \(.*\)/],
    ];
    for (const [folder, error] of failures) {
      expect(byFolder[folder]!.status).toBe('failed');
      expect(byFolder[folder]!.error).toMatch(error);
    }
  });

  test.each([
    [
      'a loaded extension serves, envelope B, with its setting from the environment',
      'GET',
      '/api/module/notes/greet/Ada',
      200,
      { text: 'Hi, Ada' },
    ],
    ['failed extensions have no routes', 'GET', '/api/module/twin/ping', 404, undefined],
    ['neither claimant of a contested prefix is mounted', 'GET', '/api/v1/files', 404, undefined],
  ] as const)('%s', async (_name, method, path, status, data) => {
    const r = await s.req(method, path);
    if (data) expectB(r, status, data);
    else {
      expect(r.status).toBe(status);
      expect(r.body.success).toBe(false);
    }
  });

  test('extensions refused for a prefix clash after their setup have had their shutdown hooks run already', () => {
    for (const name of ['files-one', 'files-two'])
      expect(existsSync(join(s.platform.dataDir, 'extensions', name, 'stopped'))).toBe(true);
  });

  test('a failed migration leaves nothing of its file behind, records nothing, and mounts no route', async () => {
    const table = await s.platform.db.query("SELECT to_regclass('ext_bad_migration.half_done') AS t");
    expect(table.rows).toEqual([{ t: null }]);
    const applied = await s.platform.db.query(
      "SELECT name FROM basalt.extension_migrations WHERE extension = 'bad-migration'",
    );
    expect(applied.rows).toEqual([]);
    expect((await s.req('GET', '/api/module/bad-migration/ping')).status).toBe(404);
  });

  test("ctx.db.dataSchema names the application tables' schema, and the extension can query it", async () => {
    await s.platform.db.exec(
      "CREATE TABLE IF NOT EXISTS public.loader_widgets (id serial PRIMARY KEY, name text NOT NULL); INSERT INTO public.loader_widgets (name) VALUES ('bolt'), ('nut')",
    );
    const r = await s.req('GET', '/api/module/data-reader/widgets');
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({ schema: 'public', names: ['bolt', 'nut'] });
  });

  test('route validation errors and thrown errors are in envelope B, with no internals', async () => {
    const bad = await s.req('GET', '/api/module/notes/greet/' + 'x'.repeat(30));
    expectBError(bad, 400, 'validation_error', {
      details: expect.objectContaining({ fields: expect.objectContaining({ who: expect.any(String) }) }),
    });
    const boom = await s.req('GET', '/api/module/notes/boom');
    expectBError(boom, 500, 'internal_error');
    expect(boom.text).not.toContain('internal detail');
  });

  test('ctx.db writes to the extension schema; ctx.requireApiKey guards', async () => {
    const dbKey = await createKey(s, { permissions: ['db:query'], tables: ['anything'] });
    const mailKey = await createKey(s, { permissions: ['mail:send'] });
    const cases: [string, Record<string, string>, number][] = [
      ['no key', {}, 401],
      ['key without db:query', { 'x-api-key': mailKey }, 403],
      ['key with db:query', { 'x-api-key': dbKey }, 201],
    ];
    for (const [name, headers, status] of cases) {
      const r = await s.req('POST', '/api/module/notes/notes', { body: { body: 'remember' }, headers });
      expect({ name, status: r.status }).toEqual({ name, status });
    }
    const { rows } = await s.platform.db.query('SELECT body FROM ext_notes.notes');
    expect(rows).toEqual([{ body: 'remember' }]);
  });

  test('ctx.requireUser and ctx.user', async () => {
    expect((await s.req('GET', '/api/module/notes/me')).status).toBe(401);
    const u = await signInUser(s);
    const r = await s.req('GET', '/api/module/notes/me', { headers: u.headers() });
    expect(r.status).toBe(200);
    expect(r.body.data.email).toMatch(/@example.com$/);
  });

  test('extension settings: env pins, the database layer is live, unknown keys are refused', async () => {
    const notes = s.platform.services.extensions.settings('notes')!;
    expect(notes.list()).toEqual([
      {
        key: 'greeting',
        value: 'Hi',
        source: 'env',
        origin: 'BASALT_EXT_NOTES_GREETING',
        secret: false,
        description: 'Greeting word.',
      },
      { key: 'max_notes', value: 10, source: 'default', origin: undefined, secret: false, description: 'Cap.' },
    ]);
    await notes.set('max_notes', 42);
    expect(notes.get('max_notes')).toBe(42);
    expect(notes.list()[1]).toMatchObject({ value: 42, source: 'database' });
    await expect(notes.set('max_notes', 1000)).rejects.toThrow('ext.notes.max_notes must be an integer from 1 to 100');
    expect(() => notes.get('nope')).toThrow("extension notes: unknown setting 'nope' (declared: greeting, max_notes)");
    const { rows } = await s.platform.db.query(
      "SELECT value FROM basalt.extension_settings WHERE extension = 'notes' AND key = 'max_notes'",
    );
    expect(rows).toEqual([{ value: 42 }]);
  });

  test.if(engine === 'external')(
    'extension settings: a change whose notification was lost is picked up by the 5 s poll',
    async () => {
      const notes = s.platform.services.extensions.settings('notes')!;
      // Written from another connection without NOTIFY: as if the notification had been
      // sent while this instance's listening connection reconnected.
      const other = postgres(s.db.url, { max: 1, onnotice: () => {} });
      try {
        await other`INSERT INTO basalt.extension_settings (extension, key, value) VALUES ('notes', 'max_notes', '77')
          ON CONFLICT (extension, key) DO UPDATE SET value = EXCLUDED.value`;
      } finally {
        await other.end();
      }
      await eventually(() => notes.get('max_notes'), { until: (v) => v === 77, timeout: 8000, what: 'the poll' });
    },
    20_000,
  );
});

describe.each(ENGINES)('extension lifecycle on %s', (engine) => {
  test('migrations run once across restarts; a bad setting value fails only that extension', async () => {
    const db = await freshDb(engine);
    const dir = extensionsDir({ 'notes/index.ts': GOOD, 'notes/migrations/001_notes.sql': GOOD_MIGRATION });
    try {
      const first = await startServer(engine, { db, env: { BASALT_EXTENSIONS_DIR: dir } });
      expect(first.platform.services.extensions.get('notes')!.migrations).toEqual(['001_notes.sql']);
      await first.stop();
      const second = await startServer(engine, {
        db,
        env: { BASALT_EXTENSIONS_DIR: dir, BASALT_EXT_NOTES_MAX_NOTES: 'many' },
      });
      const rec = second.platform.services.extensions.get('notes')!;
      await second.stop();
      expect(rec.status).toBe('failed');
      expect(rec.error).toBe(
        'setup failed: BASALT_EXT_NOTES_MAX_NOTES: ext.notes.max_notes must be an integer from 1 to 100, got "many"',
      );
      const third = await startServer(engine, { db, env: { BASALT_EXTENSIONS_DIR: dir } });
      const again = third.platform.services.extensions.get('notes')!;
      const applied = await third.platform.db.query(
        "SELECT name FROM basalt.extension_migrations WHERE extension = 'notes'",
      );
      await third.stop();
      expect(again).toMatchObject({ status: 'loaded', migrations: [] });
      expect(applied.rows).toEqual([{ name: '001_notes.sql' }]);
    } finally {
      await db.drop();
    }
  });

  test('media-library removed, contact-form still there: every /api/v1/files/* path is 404', async () => {
    const dir = extensionsDir({});
    cpSync(join(REPO_EXTENSIONS, 'contact-form'), join(dir, 'contact-form'), { recursive: true });
    const s = await startServer(engine, { env: { BASALT_EXTENSIONS_DIR: dir } });
    try {
      expect(s.platform.services.extensions.list().map((r) => [r.name, r.status])).toEqual([
        ['contact-form', 'loaded'],
      ]);
      // contact-form serves (503: no recipient configured), so extensions are mounted at all.
      const contact = await s.req('POST', '/api/module/contact-form/submit', {
        body: { name: 'A', email: 'a@example.com', message: 'hi' },
      });
      expect(contact.status).toBe(503);
      // With a key that would be allowed everything, so a 404 is not an auth answer in disguise.
      const headers = { 'x-api-key': await createKey(s, { permissions: ['files:*'] }) };
      const id = crypto.randomUUID();
      const asked: [string, string][] = [
        ['GET', '/api/v1/files'],
        ['GET', `/api/v1/files/${id}`],
        ['GET', `/api/v1/files/${id}/content`],
        ['HEAD', `/api/v1/files/${id}/content`],
        ['DELETE', `/api/v1/files/${id}`],
      ];
      for (const [method, path] of asked) {
        const r = await s.req(method, path, { headers });
        expect({ method, path, status: r.status }).toEqual({ method, path, status: 404 });
        if (method !== 'HEAD') expectCError(r, 404, 'not_found');
      }
      const posted = await upload(s, 'bytes', { headers });
      expectCError(posted, 404, 'not_found');
    } finally {
      await s.stop();
    }
  });

  test('no extensions dir: the platform starts, the Files API is absent (404)', async () => {
    const s = await startServer(engine, { env: { BASALT_EXTENSIONS_DIR: '/nonexistent/basalt-extensions' } });
    try {
      expect(s.platform.services.extensions.list()).toEqual([]);
      const r = await s.req('GET', '/api/v1/files');
      expectCError(r, 404, 'not_found');
    } finally {
      await s.stop();
    }
  });
});
