/**
 * The administrator session's idle check uses the true last use (docs/admin.md,
 * "Sessions"): `last_seen_at` is written behind with a bound under the idle limit, and
 * the check allows for that bound, so a session used 15 s before a 1-minute limit is
 * still alive 20 s later. Before, it was written only when older than 60 s, and such a
 * session got 401 at 65 s. Time is moved by shifting the session's stored times back,
 * as the clock would (test/binary has a real-time run of the same scenario): SQL beside the
 * server, so `canSql`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { canSql, type TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { startAdminServer } from '../admin/support';

describe.each(ENGINES)('admin session idle limit on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAdminServer(engine, { env: { BASALT_ADMIN_SESSION_IDLE_MINUTES: '1' } });
  }, 180_000);
  afterAll(() => s.stop());

  /** Move the session `seconds` into the past, as if that much time had gone by (SQL beside the server). */
  const age = (a: AdminAuth, seconds: number) =>
    s.sql(
      `UPDATE basalt.admin_sessions SET created_at = created_at - make_interval(secs => $2),
              last_seen_at = last_seen_at - make_interval(secs => $2)
        WHERE admin_id = $1`,
      [a.admin.id, seconds],
    );
  const me = (a: AdminAuth) => adminReq(s, a, 'GET', '/api/admin/auth/me');

  test.if(canSql(engine))('a session used 15 s before a 1-minute limit survives to 65 s', async () => {
    const a = await signInAdmin(s);
    await age(a, 45);
    expect((await me(a)).status).toBe(200); // used at 45 s
    await age(a, 20);
    expect((await me(a)).status).toBe(200); // 65 s after sign-in, 20 s after the last use
  });

  test.if(canSql(engine))('activity keeps it alive; a session left alone for longer than the limit ends', async () => {
    const a = await signInAdmin(s);
    for (let i = 0; i < 6; i++) {
      await age(a, 20);
      expect((await me(a)).status).toBe(200);
    }
    // Past the limit plus the write-behind bound (a quarter of it: 15 s).
    await age(a, 76);
    expect((await me(a)).status).toBe(401);
  });
});
