/**
 * One mailbox, one account (docs/auth.md, "E-mail addresses and passwords"): lower-casing
 * `İ` leaves `i` + a combining dot above, which reads as `i`; the dot is dropped, so
 * `VİCTIM@…` is `victim@…` for site users and administrators alike, and migration 090
 * folds stored rows the same way (a look-alike of another account is disabled). Before,
 * `VİCTIM@…` registered as a second account that reads like the first.
 *
 * Domains are stored in their ASCII (xn--) form, so `a@bücher.example` and
 * `a@xn--bcher-kva.example` are one account (migration 140 converts stored rows); a new
 * account whose local part or one of whose domain labels mixes scripts (`pаypal` with a
 * Cyrillic `а`) is refused. Before, both spellings registered twice and the mixed one was
 * accepted.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, type TestServer } from '../helpers/server';
import { expectA, expectAError } from '../helpers/envelopes';
import { hashPassword } from '../../src/modules/auth/passwords';
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

  test.if(ON_SOURCE)('administrators too', async () => {
    const email = userEmail('opsi');
    await s.platform.services.admin.create(email, 'admin password 1234', CLI_ACTOR);
    await expect(s.platform.services.admin.create(dotted(email), 'admin password 1234', CLI_ACTOR)).rejects.toThrow(
      /already exists/,
    );
  });

  test.if(ON_SOURCE)('migration 090 folds stored rows; a look-alike of another account is disabled', async () => {
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

describe.each(ENGINES)('international domains and mixed scripts on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAuthServer(engine);
  }, 180_000);
  afterAll(() => s.stop());

  const register = (email: string) =>
    s.req('POST', '/api/v1/auth/register', {
      body: { email, password: USER_PASSWORD },
      headers: { 'x-forwarded-for': userIp() },
    });
  const login = (email: string) =>
    s.req('POST', '/api/v1/auth/login', {
      body: { email, password: USER_PASSWORD },
      headers: { 'x-forwarded-for': userIp() },
    });

  test('a@bücher.example and a@xn--bcher-kva.example are one account, stored in the xn-- form', async () => {
    const local = `a${Date.now().toString(36)}`;
    const first = await register(`${local}@Bücher.example`);
    expectA(first, 201);
    expect(first.body.data.user.email).toBe(`${local}@xn--bcher-kva.example`);
    expectAError(await register(`${local}@xn--bcher-kva.example`), 409, 'email_taken');
    expectAError(await register(`${local}@bu\u0308cher.example`), 409, 'email_taken'); // decomposed ü
    for (const spelling of [`${local}@bücher.example`, `${local}@XN--BCHER-KVA.EXAMPLE`])
      expect(expectA(await login(spelling), 200).user.id).toBe(first.body.data.user.id);
    // A domain IDNA refuses is not an address.
    expectAError(await register(`${local}@xn--zz.example`), 422, 'validation_error');
  });

  test('a new account whose local part mixes scripts → 400 email_mixed_scripts; one script (or CJK writing) is fine', async () => {
    const stamp = Date.now(); // digits: of no script
    const mixed = await register(`p\u0430ypal-${stamp}@example.com`); // Cyrillic а among Latin letters
    expectAError(mixed, 400, 'email_mixed_scripts');
    expect(mixed.body.error.message).toContain('scripts');
    for (const ok of [`иван-${stamp}@example.com`, `山田たろう-${stamp}@example.com`, `josé-${stamp}@example.com`])
      expectA(await register(ok), 201);
  });

  test('a domain label that mixes scripts → 400 email_mixed_scripts, in either spelling; one script per label is fine', async () => {
    const stamp = Date.now().toString(36);
    // A Cyrillic а inside the Latin label `paypal`: the look-alike domain, stored as xn--pypal-4ve.
    for (const domain of ['p\u0430ypal.example', 'xn--pypal-4ve.example', 'mail.g\u043e\u043egle.example']) {
      const r = await register(`bob-${stamp}@${domain}`);
      expectAError(r, 400, 'email_mixed_scripts');
      expect(r.body.error.message).toContain('domain');
    }
    // Each label in one script: a Cyrillic name under a Latin top-level domain, Japanese, Greek, Latin with digits.
    for (const domain of ['пример.example', '例え.テスト', 'ελληνικά.example', 'münchen-2.example']) {
      const r = expectA(await register(`bob-${stamp}@${domain}`), 201);
      expect(r.user.email).toMatch(/^bob-[a-z0-9]+@[a-z0-9.-]+$/); // stored in the xn-- form
    }
  });

  test.if(ON_SOURCE)('an existing account with a mixed-script address still signs in', async () => {
    const address = `p\u0430ypal-${Date.now().toString(36)}@example.com`;
    await s.platform.db.query('INSERT INTO basalt.users (email, password_hash) VALUES ($1, $2)', [
      address,
      await hashPassword(USER_PASSWORD),
    ]);
    expect(expectA(await login(address), 200).user.email).toBe(address);
  });

  test.if(ON_SOURCE)('migration 140 converts stored domains; a look-alike of another account is disabled', async () => {
    const stamp = Date.now().toString(36);
    const free = `free-${stamp}@bücher.example`;
    const taken = `taken-${stamp}@xn--bcher-kva.example`;
    const lookalike = `taken-${stamp}@bücher.example`;
    const adminFree = `ops-${stamp}@bücher.example`;
    const q = (sql: string, params: unknown[] = []) => s.platform.db.query<any>(sql, params);
    for (const e of [taken, free, lookalike])
      await q('INSERT INTO basalt.users (email, password_hash) VALUES ($1, $2)', [e, 'x']);
    await q('INSERT INTO basalt.admins (email, password_hash) VALUES ($1, $2)', [adminFree, 'x']);
    await q(`DELETE FROM basalt.platform_migrations WHERE name = '140_email_idn_domains'`);
    expect(await migratePlatform(s.platform.db)).toEqual(['140_email_idn_domains']);
    const rows = (
      await q('SELECT email, disabled_at FROM basalt.users WHERE email LIKE $1 ORDER BY email', [`%-${stamp}@%`])
    ).rows;
    expect(rows).toEqual([
      { email: `free-${stamp}@xn--bcher-kva.example`, disabled_at: null },
      { email: lookalike, disabled_at: expect.any(Date) },
      { email: taken, disabled_at: null },
    ]);
    expect((await q('SELECT email FROM basalt.admins WHERE email LIKE $1', [`ops-${stamp}@%`])).rows).toEqual([
      { email: `ops-${stamp}@xn--bcher-kva.example` },
    ]);
    // Run again: nothing left to do.
    await q(`DELETE FROM basalt.platform_migrations WHERE name = '140_email_idn_domains'`);
    await migratePlatform(s.platform.db);
    expect(
      (await q('SELECT count(*)::int AS n FROM basalt.users WHERE email LIKE $1', [`%-${stamp}@%`])).rows[0].n,
    ).toBe(3);
  });
});
