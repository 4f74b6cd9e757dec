/**
 * Public Auth's housekeeping (expired refresh tokens, old rate-limit counters). It runs on a
 * 15-minute timer of the serving process with no way to start it from outside, so this suite
 * calls it in process and stays on the source; the token scenarios run on both targets in
 * ./tokens.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { signInUser } from '../helpers/users';
import { startAuthServer } from './support';

describe.each(ENGINES)('auth housekeeping on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAuthServer(engine);
  });
  afterAll(() => s.stop());

  test('housekeeping drops expired refresh tokens and old counters, keeps live ones', async () => {
    const u = await signInUser(s);
    const db = s.platform.db;
    const id = u.refresh_token.split('.')[0];
    await db.query(
      `INSERT INTO basalt.auth_rate_limits (bucket, window_start, hits) VALUES ('test:old', now() - interval '2 days', 1)`,
    );
    await s.platform.services.auth.prune();
    expect((await db.query('SELECT 1 FROM basalt.auth_refresh_tokens WHERE id = $1', [id])).rowCount).toBe(1);
    expect((await db.query(`SELECT 1 FROM basalt.auth_rate_limits WHERE bucket = 'test:old'`)).rowCount).toBe(0);
    await db.query(`UPDATE basalt.auth_refresh_tokens SET expires_at = now() - interval '2 days' WHERE id = $1`, [id]);
    await s.platform.services.auth.prune();
    expect((await db.query('SELECT 1 FROM basalt.auth_refresh_tokens WHERE id = $1', [id])).rowCount).toBe(0);
  });
});
