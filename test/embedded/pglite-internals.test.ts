import { expect, test } from 'bun:test';
import { PGlite } from '@electric-sql/pglite';
import { checkPgliteInternals, PGLITE_INTERNALS } from '../../src/db/pglite-internals';

// What Basalt uses of PGlite beyond its promises (src/db/pglite-internals.ts) is checked when the
// embedded engine opens: this PGlite has all of it, and one that lacks a part fails, naming it.

const sample: Record<string, unknown> = { boolean: false, object: {}, function: () => {}, number: 0 };
const like = (expected: Record<string, string>) =>
  Object.fromEntries(Object.entries(expected).map(([k, t]) => [k, sample[t.split('|')[0]!]]));

test('the PGlite Basalt ships has every internal it uses', async () => {
  const pg = await PGlite.create();
  try {
    expect(() => checkPgliteInternals(pg)).not.toThrow();
  } finally {
    await pg.close();
  }
});

test('a build that lacks one, or has it of another type, fails naming each', () => {
  const mod = like(PGLITE_INTERNALS.module);
  const pg: Record<string, unknown> = { ...like(PGLITE_INTERNALS.instance), mod };
  expect(() => checkPgliteInternals(pg)).not.toThrow();
  delete pg._runExclusiveQuery;
  mod._XLogFlush = 0;
  expect(() => checkPgliteInternals(pg)).toThrow(
    'embedded engine: this PGlite build lacks what Basalt uses of it (src/db/pglite-internals.ts): _runExclusiveQuery (function, found undefined), mod._XLogFlush (function, found number)',
  );
  expect(() => checkPgliteInternals({ ...pg, mod: undefined })).toThrow(
    'mod (object, found undefined), mod._PostgresMainLoopOnce',
  );
});
