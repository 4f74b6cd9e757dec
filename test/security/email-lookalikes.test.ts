/**
 * One mailbox, one account (docs/auth.md, "E-mail addresses and passwords"): lower-casing
 * `İ` leaves `i` + a combining dot above, which reads as `i`; the dot is dropped, so
 * `VİCTIM@…` is `victim@…` for site users and administrators alike, and migration 090
 * folds stored rows the same way (a look-alike of another account is disabled). Before,
 * `VİCTIM@…` registered as a second account that reads like the first.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { registerUser, userEmail, userIp, USER_PASSWORD } from '../helpers/users';
import { startAuthServer } from '../auth/support';
import { CLI_ACTOR } from '../../src/modules/admin/audit';
import { migratePlatform } from '../../src/db/migrate';

describe.each(ENGINES)('look-alike e-mail spellings on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAuthServer(engine);
  }, 180_000);
  afterAll(() => s.stop());

  /** `victim-…@example.com` with its first `i` written as the capital dotted `İ`. */
  const dotted = (e: string) => e.toUpperCase().replace('I', 'İ');

  test('VİCTIM@… is victim@…: a second registration is refused and a login reaches the one account', async () => {
    const email = userEmail('victim');
    const first = await registerUser(s, { email });
    const again = await s.req('POST', '/api/v1/auth/register', {
      body: { email: dotted(email), password: USER_PASSWORD },
      headers: { 'x-forwarded-for': userIp() },
    });
    expect(again.status).toBe(409);
    const login = await s.req('POST', '/api/v1/auth/login', {
      body: { email: dotted(email), password: USER_PASSWORD },
      headers: { 'x-forwarded-for': userIp() },
    });
    expect(login.status).toBe(200);
    expect(login.body.data.user.id).toBe(first.body.data.user.id);
  });

  test('administrators too', async () => {
    const email = userEmail('opsi');
    await s.platform.services.admin.create(email, 'admin password 1234', CLI_ACTOR);
    await expect(s.platform.services.admin.create(dotted(email), 'admin password 1234', CLI_ACTOR)).rejects.toThrow(
      /already exists/,
    );
  });

  test('migration 090 folds stored rows; a look-alike of another account is disabled', async () => {
    const free = userEmail('vi\u0307ctim');
    const taken = userEmail('victim');
    const lookalike = taken.replace('victim', 'vi\u0307ctim');
    const q = (sql: string, params: unknown[] = []) => s.platform.db.query<any>(sql, params);
    for (const e of [free, taken, lookalike])
      await q('INSERT INTO basalt.users (email, password_hash) VALUES ($1, $2)', [e, 'x']);
    await q(`DELETE FROM basalt.platform_migrations WHERE name = '090_email_soft_dotted'`);
    expect(await migratePlatform(s.platform.db)).toEqual(['090_email_soft_dotted']);
    const rows = (
      await q('SELECT email, disabled_at FROM basalt.users WHERE email = ANY ($1) ORDER BY email', [
        [free, free.replace('\u0307', ''), taken, lookalike],
      ])
    ).rows;
    expect(rows).toEqual(
      [
        { email: free.replace('\u0307', ''), disabled_at: null },
        { email: taken, disabled_at: null },
        { email: lookalike, disabled_at: expect.any(Date) },
      ].sort((a, b) => (a.email < b.email ? -1 : 1)),
    );
  });
});
