/** `basalt extensions list|settings|set|unset` from the command line, on both engines. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { runCli } from '../helpers/cli';
import { extensionsDir } from './support';
import { GOOD, GOOD_MIGRATION, IMPORT_THROWS } from './fixtures';

const DIR = extensionsDir({
  'notes/index.ts': GOOD,
  'notes/migrations/001_notes.sql': GOOD_MIGRATION,
  'broken/index.ts': IMPORT_THROWS,
});

describe.each(ENGINES)('extensions CLI on %s', (engine) => {
  let db: FreshDb;
  const cli = (...args: string[]) =>
    runCli(args, { ...db.env, BASALT_EXTENSIONS_DIR: DIR, BASALT_LOG_LEVEL: 'silent' });
  beforeAll(async () => {
    db = await freshDb(engine);
  });
  afterAll(() => db.drop());

  test('list shows what loaded and why the others failed (exit 1 when any failed)', async () => {
    const r = await cli('extensions', 'list');
    expect(r.code).toBe(1);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^broken\s+-\s+failed\s+import of .*broken\/index.ts failed: broken at import$/);
    expect(lines[1]).toMatch(/^notes\s+2\.1\.0\s+loaded\s+4 routes$/);
  });

  test.each([
    ['set a value', ['extensions', 'set', 'notes', 'max_notes', '42'], 0, /ext\.notes\.max_notes stored/],
    ['it is stored', ['extensions', 'settings', 'notes'], 0, /max_notes = 42 {2}\(database\)/],
    [
      'wrong type',
      ['extensions', 'set', 'notes', 'max_notes', 'many'],
      1,
      /ext\.notes\.max_notes must be an integer from 1 to 100, got "many"/,
    ],
    [
      'unknown key',
      ['extensions', 'set', 'notes', 'colour', 'red'],
      1,
      /unknown setting 'colour' \(declared: greeting, max_notes\)/,
    ],
    ['failed extension', ['extensions', 'settings', 'broken'], 2, /extension 'broken' failed to load: import of/],
    ['unset', ['extensions', 'unset', 'notes', 'max_notes'], 0, /ext\.notes\.max_notes unset/],
  ] as const)('%s', async (_name, args, code, pattern) => {
    const r = await cli(...args);
    expect({ code: r.code, out: r.stdout + r.stderr }).toEqual({ code, out: expect.stringMatching(pattern) });
  });
});
