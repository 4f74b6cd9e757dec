/**
 * Hostile input on Public Auth (docs/auth.md, E-mail addresses and passwords): control
 * and invisible characters, lookalike spellings of one address, address literals,
 * passwords of any content and length counted in code points, NUL in every string
 * field. Every answer is a 2xx or a 4xx in format A — never a 500. Migration 060's
 * reconciliation of existing rows and its check constraint.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, type Reply, type TestServer } from '../helpers/server';
import { migratePlatform } from '../../src/db/migrate';
import { PgError } from '../../src/db/engine';
import { PASSWORD, call, email, startAuthServer } from '../auth/support';
import { registerUser } from '../helpers/users';
import { rawRequest, requestText } from './raw-http';
import { expectAError } from '../helpers/envelopes';

/** 422 validation_error naming `field`. */
const refused = (r: Reply, field: 'email' | 'password') =>
  expectAError(r, 422, 'validation_error', { details: { fields: { [field]: expect.any(String) } } });

/** Addresses refused on every route an address enters by: [name, address, words of the problem]. */
const REFUSED: [string, string, string][] = [
  ['NUL', 'nulz\u0000@example.com', 'control characters'],
  ['NUL at the end', 'nulz@example.com\u0000', 'control characters'],
  ['C0 control inside', 'a\u0001b@example.com', 'control characters'],
  ['newline inside', 'a\nb@example.com', 'control characters'],
  ['DEL', 'a\u007fb@example.com', 'control characters'],
  ['C1 control (NEL)', 'a\u0085b@example.com', 'control characters'],
  ['zero-width space', 'bo\u200bb@example.com', 'invisible'],
  ['zero-width joiner', 'bo\u200db@example.com', 'invisible'],
  ['soft hyphen', 'bo\u00adb@example.com', 'invisible'],
  ['BOM inside', 'bo\ufeffb@example.com', 'invisible'],
  ['right-to-left override', 'bob@exa\u202emple.com', 'invisible'],
  ['left-to-right mark', '\u200ebob@example.com', 'invisible'],
  ['word joiner', 'bob\u2060@example.com', 'invisible'],
  ['variation selector', 'bob\ufe0f@example.com', 'invisible'],
  ['tag character', 'bob\u{e0041}@example.com', 'invisible'],
  ['Hangul filler', 'bob\u3164@example.com', 'invisible'],
  ['lone surrogate', 'bob\ud800@example.com', 'Unicode'],
  ['space inside', 'bo b@example.com', 'spaces'],
  ['ideographic space inside', 'bo\u3000b@example.com', 'spaces'],
  ['IPv4 address literal', 'user@[127.0.0.1]', 'e-mail address'],
  ['IPv6 address literal', 'user@[IPv6:::1]', 'e-mail address'],
  ['bare IPv4 domain', 'user@127.0.0.1', 'e-mail address'],
  ['quoted local part', '"bob"@example.com', 'e-mail address'],
  ['comment', 'bob(comment)@example.com', 'e-mail address'],
  ['two @', 'a@b@example.com', 'e-mail address'],
  ['no dot in the domain', 'bob@localhost', 'e-mail address'],
  ['empty label', 'bob@example..com', 'e-mail address'],
  ['leading dot', '.bob@example.com', 'e-mail address'],
  ['double dot in the local part', 'b..ob@example.com', 'e-mail address'],
  ['hyphen at a label edge', 'bob@-example.com', 'e-mail address'],
  ['local part over 64', `${'a'.repeat(65)}@example.com`, 'e-mail address'],
  ['only spaces', '   ', 'required'],
];

describe.each(ENGINES)('hostile auth input on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startAuthServer(engine);
    // Mail configured (to a port nobody listens on), so verify-email/resend reaches the address check.
    await s.settings.set('mail.smtp_url', 'smtp://127.0.0.1:9');
    await s.settings.set('mail.from', 'noreply@example.com');
  });
  afterAll(() => s.stop());

  describe.each([
    ['register', (address: string) => ({ email: address, password: PASSWORD })],
    ['login', (address: string) => ({ email: address, password: PASSWORD })],
    ['password/forgot', (address: string) => ({ email: address })],
    ['verify-email/resend', (address: string) => ({ email: address })],
  ] as const)('%s', (path, body) => {
    test.each(REFUSED)('%s → 422 naming email', async (_name, address, words) => {
      const r = await call(s, { path, body: body(address) });
      refused(r, 'email');
      expect(r.body.error.details.fields.email).toContain(words);
    });
  });

  test('lookalike spellings are one account: fullwidth, case, NFD/NFC, outer whitespace and BOM', async () => {
    const tag = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6)}`;
    const plain = `bob${tag}@example.com`;
    const created = await registerUser(s, { email: plain });
    const id = created.body.data.user.id;
    const fullwidth =
      [...`BOB${tag}`].map((c) => String.fromCodePoint(c.codePointAt(0)! + 0xfee0)).join('') + '@example.com';
    for (const spelling of [fullwidth, `BOB${tag}@EXAMPLE.COM`, `\t ${plain} \n`, `\ufeff${plain}`]) {
      const again = await call(s, { path: 'register', body: { email: spelling, password: PASSWORD } });
      expectAError(again, 409, 'email_taken');
    }
    const login = await call(s, { path: 'login', body: { email: fullwidth, password: PASSWORD } });
    expect(login.status).toBe(200);
    expect(login.body.data.user).toMatchObject({ id, email: plain });

    const nfc = `jos\u00e9${tag}@example.com`;
    const nfd = `jose\u0301${tag}@example.com`;
    const jose = await registerUser(s, { email: nfd });
    expect(jose.body.data.user.email).toBe(nfc);
    expect((await call(s, { path: 'register', body: { email: nfc, password: PASSWORD } })).status).toBe(409);
    const byNfc = await call(s, { path: 'login', body: { email: nfc, password: PASSWORD } });
    expect(byNfc.body.data.user.id).toBe(jose.body.data.user.id);
    if (ON_SOURCE) {
      const { rows } = await s.platform.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM basalt.users WHERE email IN ($1, $2, $3)',
        [plain, nfc, nfd],
      );
      expect(rows[0]!.n).toBe(2);
    }
  });

  test('international addresses are accepted and stored normalized (the domain in its xn-- form)', async () => {
    const r = await call(s, { path: 'register', body: { email: `Ä${Date.now()}@Bücher.de`, password: PASSWORD } });
    expect(r.status).toBe(201);
    expect(r.body.data.user.email).toMatch(/^ä\d+@xn--bcher-kva\.de$/);
  });

  test('passwords: any character, length in code points, never a 500', async () => {
    const nul = `pass\u0000word\u0001\u007f`;
    const address = email('nulpw');
    expect((await call(s, { path: 'register', body: { email: address, password: nul } })).status).toBe(201);
    expect((await call(s, { path: 'login', body: { email: address, password: nul } })).status).toBe(200);
    expect((await call(s, { path: 'login', body: { email: address, password: 'pass' } })).status).toBe(401);

    // 1024 astral characters are 2048 UTF-16 units: still within the limit of 1024 characters.
    const emoji = '\u{1F600}';
    const long = email('longpw');
    expect((await call(s, { path: 'register', body: { email: long, password: emoji.repeat(1024) } })).status).toBe(201);
    expect((await call(s, { path: 'login', body: { email: long, password: emoji.repeat(1024) } })).status).toBe(200);
    const over = await call(s, { path: 'register', body: { email: email(), password: emoji.repeat(1025) } });
    refused(over, 'password');
    // 4 emoji are 8 UTF-16 units but 4 characters: under the minimum of 8.
    const short = await call(s, { path: 'register', body: { email: email(), password: emoji.repeat(4) } });
    refused(short, 'password');
    expect(short.body.error.details.fields.password).toBe('must be at least 8 characters');
    const lone = await call(s, { path: 'register', body: { email: email(), password: 'abcdefgh\ud800' } });
    refused(lone, 'password');
    expect((await call(s, { path: 'login', body: { email: long, password: 'abcdefgh\ud800' } })).status).toBe(401);
  });

  test.each([
    ['refresh', { refresh_token: 'abc\u0000def' }],
    ['refresh', { refresh_token: '\u0000'.repeat(60) }],
    ['logout', { refresh_token: 'ZmkS9Av6a_ZRek_Q.suvUuQV43Wl8WUgT6YIgwmtYutl5ZRhxNFCXDtHYn7\u0000' }],
    ['password/reset', { token: 'k3Jd9sQw0PzL1xVb.\u0000', password: PASSWORD }],
    [
      'password/reset',
      { token: 'k3Jd9sQw0PzL1xVb.Hq7mM2r0aVtY4nq1Jd8sLw9pXoZb3cE5fG6hI7jK8lM', password: `a\u0000${PASSWORD}` },
    ],
    ['verify-email', { token: 'x\u0000\ud800' }],
    ['login', { email: 'ok@example.com', password: '\u0000\u0000\u0000' }],
    ['login', { email: '\u0000', password: '\u0000' }],
    ['register', { email: `${'\u0000'.repeat(300)}@example.com`, password: PASSWORD }],
  ])('NUL in %s %j → a 4xx, never a 500', async (path, body) => {
    const r = await call(s, { path, body });
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.body.success).toBe(false);
  });

  test('a User-Agent of raw high bytes (stored with the session) is no 500', async () => {
    const address = email('ua');
    await registerUser(s, { email: address });
    const body = JSON.stringify({ email: address, password: PASSWORD });
    const text = requestText(
      'POST',
      '/api/v1/auth/login',
      [
        ['Host', 'x'],
        ['Content-Type', 'application/json'],
        ['Content-Length', String(Buffer.byteLength(body))],
        ['User-Agent', '\xff\xfe\x80 agent \xc3\x28'],
      ],
      body,
    );
    // The answer ends with the connection (requestText asks to close it); the long quiet allowance
    // is for a busy machine, where an argon2id sign-in alone can take longer than the default 700 ms.
    const r = await rawRequest(s.publicUrl, Buffer.from(text, 'latin1'), 15_000);
    expect(r.responses[0]?.status).toBe(200);
  });

  test('password/change with NUL and astral characters', async () => {
    const address = email('change');
    const reg = await registerUser(s, { email: address });
    const token = reg.body.data.access_token;
    const next = `\u0000${'\u{1F511}'.repeat(8)}`;
    const r = await call(s, {
      path: 'password/change',
      token,
      body: { current_password: PASSWORD, new_password: next },
    });
    expect(r.status).toBe(200);
    expect((await call(s, { path: 'login', body: { email: address, password: next } })).status).toBe(200);
    const wrong = await call(s, {
      path: 'password/change',
      token,
      body: { current_password: '\u0000', new_password: PASSWORD },
    });
    expect(wrong.status).toBe(400);
  });

  test.if(ON_SOURCE)('the table refuses what the application refuses (check constraint of migration 060)', async () => {
    for (const bad of [
      'zw\u200bsp@example.com',
      'soft\u00adhyphen@example.com',
      'jose\u0301@example.com',
      '\uff41@example.com',
      'ctl\u0001@example.com',
    ]) {
      const e = await s.platform.db
        .query("INSERT INTO basalt.users (email, password_hash) VALUES ($1, 'x')", [bad])
        .then(
          () => undefined,
          (err) => err,
        );
      expect(e).toBeInstanceOf(PgError);
      expect((e as PgError).code).toBe('23514');
    }
  });

  test.if(ON_SOURCE)(
    'migration 060 rewrites old spellings, and keeps and disables lookalikes of a taken address',
    async () => {
      const db = s.platform.db;
      const t = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6)}`;
      const fw = (text: string) =>
        [...text].map((c) => (/[a-z0-9]/.test(c) ? String.fromCodePoint(c.codePointAt(0)! + 0xfee0) : c)).join('');
      await db.exec('ALTER TABLE basalt.users DROP CONSTRAINT users_email_normalized');
      const insert = async (address: string, age: number) =>
        (
          await db.query<{ id: string }>(
            "INSERT INTO basalt.users (email, password_hash, created_at) VALUES ($1, 'x', now() - make_interval(secs => $2)) RETURNING id",
            [address, age],
          )
        ).rows[0]!.id;
      const rows = {
        fullwidth: await insert(`${fw('alone' + t)}@example.com`, 50), // free → rewritten
        nfd: await insert(`jose\u0301${t}@example.com`, 50), // free → rewritten
        zwsp: await insert(`zw\u200bsp${t}@example.com`, 50), // free → rewritten
        taken: await insert(`taken${t}@example.com`, 100),
        lookalike: await insert(`${fw('taken' + t)}@example.com`, 50), // collides → kept, disabled
        twinOld: await insert(`${fw('twin' + t)}@example.com`, 90), // oldest of two → gets the spelling
        twinNew: await insert(`tw\u00adin${t}@example.com`, 10), // the other → kept, disabled
      };
      await db.query("DELETE FROM basalt.platform_migrations WHERE name = '060_users_email_nfkc'");
      expect(await migratePlatform(db)).toEqual(['060_users_email_nfkc']);
      const after = async (id: string) =>
        (
          await db.query<{ email: string; disabled: boolean }>(
            'SELECT email, disabled_at IS NOT NULL AS disabled FROM basalt.users WHERE id = $1',
            [id],
          )
        ).rows[0]!;
      expect(await after(rows.fullwidth)).toEqual({ email: `alone${t}@example.com`, disabled: false });
      expect(await after(rows.nfd)).toEqual({ email: `jos\u00e9${t}@example.com`, disabled: false });
      expect(await after(rows.zwsp)).toEqual({ email: `zwsp${t}@example.com`, disabled: false });
      expect(await after(rows.taken)).toEqual({ email: `taken${t}@example.com`, disabled: false });
      expect(await after(rows.lookalike)).toEqual({ email: `${fw('taken' + t)}@example.com`, disabled: true });
      expect(await after(rows.twinOld)).toEqual({ email: `twin${t}@example.com`, disabled: false });
      expect(await after(rows.twinNew)).toEqual({ email: `tw\u00adin${t}@example.com`, disabled: true });
      // The constraint is back, and holds new rows to the rule.
      const refused = await db
        .query("INSERT INTO basalt.users (email, password_hash) VALUES ($1, 'x')", [`new\u200b${t}@example.com`])
        .catch((e) => e);
      expect((refused as PgError).code).toBe('23514');
    },
  );
});
