/**
 * Registration, login and /me: scenario tables on both engines. Stored hashes are read
 * beside the server (`s.sql`), so those two checks need `canSql` (on the executable: external
 * PostgreSQL only).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { canSql, ON_SOURCE, type Reply, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { PASSWORD, call, email, setDisabled, startAuthServer } from './support';
import { expectA, expectAError } from '../helpers/envelopes';
import { signInUser, registerUser } from '../helpers/users';

/** A 422 validation_error naming these fields. */
const fields = (f: Record<string, unknown>) => (r: Reply) =>
  expectAError(r, 422, 'validation_error', { details: { fields: expect.objectContaining(f) } });

/** An assertion on the answer: status and envelope. */
type Check = (r: Reply) => void;

describe.each(ENGINES)('accounts on %s', (engine) => {
  let s: TestServer;
  const taken = email('taken');
  beforeAll(async () => {
    s = await startAuthServer(engine);
    await registerUser(s, { email: taken });
  });
  afterAll(() => s.stop());

  const registerCases: [string, unknown, Check][] = [
    [
      'valid registration',
      { email: 'New.User@Example.com', password: PASSWORD },
      (r) =>
        expectA(
          r,
          201,
          expect.objectContaining({
            user: expect.objectContaining({ email: 'new.user@example.com', email_verified: false }),
            verification_required: false,
            token_type: 'Bearer',
            expires_in: 900,
            refresh_expires_in: 2_592_000,
          }),
        ),
    ],
    [
      'same address in other case and spaces',
      { email: `  ${taken.toUpperCase()} `, password: PASSWORD },
      (r) => expectAError(r, 409, 'email_taken'),
    ],
    ['missing email', { password: PASSWORD }, fields({ email: expect.any(String) })],
    [
      'not an address',
      { email: 'ada.example.com', password: PASSWORD },
      fields({ email: expect.stringContaining('e-mail address') }),
    ],
    [
      'password too short',
      { email: email(), password: 'short' },
      fields({ password: 'must be at least 8 characters' }),
    ],
    ['password over 1024', { email: email(), password: 'x'.repeat(1025) }, fields({ password: expect.any(String) })],
    ['password not a string', { email: email(), password: 12345678 }, fields({ password: expect.any(String) })],
  ];
  test.each(registerCases)('register: %s', async (_name, body, check) => {
    check(await call(s, { path: 'register', body }));
  });

  test('register: malformed JSON and wrong content type', async () => {
    const bad = await s.req('POST', '/api/v1/auth/register', {
      raw: '{"email":',
      headers: { 'content-type': 'application/json' },
    });
    expectAError(bad, 400, 'invalid_json');
    const form = await s.req('POST', '/api/v1/auth/register', {
      raw: 'email=a',
      headers: { 'content-type': 'text/plain' },
    });
    expectAError(form, 415, 'unsupported_media_type');
  });

  test.if(canSql(engine))('the stored hash is argon2id and never returned', async () => {
    const r = await registerUser(s);
    expect(JSON.stringify(r.body)).not.toContain('argon2');
    const rows = await s.sql<{ password_hash: string }>('SELECT password_hash FROM basalt.users WHERE id = $1', [
      r.body.data.user.id,
    ]);
    expect(rows[0]!.password_hash).toStartWith('$argon2id$v=19$m=19456,t=2,p=1$');
  });

  test.if(canSql(engine))('a hash made with other argon2 parameters is upgraded at the next login', async () => {
    const address = email('rehash');
    const r = await registerUser(s, { email: address });
    const old = await Bun.password.hash(PASSWORD, { algorithm: 'argon2id', memoryCost: 8192, timeCost: 1 });
    await s.sql('UPDATE basalt.users SET password_hash = $2 WHERE id = $1', [r.body.data.user.id, old]);
    expect((await call(s, { path: 'login', body: { email: address, password: PASSWORD } })).status).toBe(200);
    const rows = await s.sql<{ password_hash: string }>('SELECT password_hash FROM basalt.users WHERE id = $1', [
      r.body.data.user.id,
    ]);
    expect(rows[0]!.password_hash).toStartWith('$argon2id$v=19$m=19456,t=2,p=1$');
  });

  test('unknown body fields are ignored, not stored', async () => {
    const r = await call(s, { path: 'register', body: { email: email(), password: PASSWORD, is_admin: true } });
    expect(r.status).toBe(201);
    expect(r.body.data.user.is_admin).toBeUndefined();
  });

  const loginCases: [string, () => unknown, Check][] = [
    [
      'right password, address in other case',
      () => ({ email: ` ${taken.toUpperCase()}`, password: PASSWORD }),
      (r) =>
        expectA(
          r,
          200,
          expect.objectContaining({
            user: expect.objectContaining({ email: taken }),
            access_token: expect.any(String),
            refresh_token: expect.any(String),
          }),
        ),
    ],
    [
      'wrong password',
      () => ({ email: taken, password: 'wrong password' }),
      (r) => expectAError(r, 401, 'invalid_credentials'),
    ],
    [
      'unknown address',
      () => ({ email: email('nobody'), password: PASSWORD }),
      (r) => expectAError(r, 401, 'invalid_credentials'),
    ],
    ['missing password', () => ({ email: taken }), fields({ password: expect.any(String) })],
    ['not an address', () => ({ email: 'nobody', password: PASSWORD }), fields({ email: expect.any(String) })],
  ];
  test.each(loginCases)('login: %s', async (_name, body, check) => {
    check(await call(s, { path: 'login', body: body() }));
  });

  test('unknown address and wrong password get the same answer in similar time', async () => {
    const time = async (address: string) => {
      const t0 = performance.now();
      const r = await call(s, { path: 'login', body: { email: address, password: 'wrong password' } });
      return { ms: performance.now() - t0, body: r.body };
    };
    // Three of each, alternating, compared by their fastest: one request stalled by the machine
    // (a collection, another process) must not decide it (CI once read 341 ms for the known one).
    const known: { ms: number; body: unknown }[] = [];
    const unknown: { ms: number; body: unknown }[] = [];
    for (let i = 0; i < 3; i++) {
      known.push(await time(taken));
      unknown.push(await time(email('ghost')));
    }
    for (const u of unknown) expect(u.body).toEqual(known[0]!.body);
    const fastest = (xs: { ms: number }[]) => Math.min(...xs.map((x) => x.ms));
    // Both verify an argon2id hash (~tens of ms); an unknown address without that work would answer in ~1 ms.
    expect(fastest(unknown)).toBeGreaterThan(fastest(known) / 3);
  });

  const meCases: [string, (t: string) => Record<string, string>, number, Check][] = [
    [
      'valid token',
      (t) => ({ authorization: `Bearer ${t}` }),
      200,
      (r) =>
        expectA(r, 200, { user: expect.objectContaining({ email_verified: false }), session_id: expect.any(String) }),
    ],
    ['no header', () => ({}), 401, (r) => expectAError(r, 401, 'unauthorized')],
    ['not Bearer', (t) => ({ authorization: `Basic ${t}` }), 401, (r) => expectAError(r, 401, 'unauthorized')],
    [
      'tampered token',
      (t) => ({ authorization: `Bearer ${t.slice(0, -3)}abc` }),
      401,
      (r) => expectAError(r, 401, 'unauthorized'),
    ],
    ['garbage', () => ({ authorization: 'Bearer not.a.jwt' }), 401, (r) => expectAError(r, 401, 'unauthorized')],
  ];
  test.each(meCases)('me: %s', async (_name, headers, status, check) => {
    const u = await signInUser(s);
    const r = await call(s, { method: 'GET', path: 'me', headers: headers(u.access_token) });
    check(r);
    if (status === 401) expect(r.headers.get('www-authenticate')).toStartWith('Bearer');
  });

  test('registration closed → 403 registration_closed', async () => {
    await s.settings.set('auth.registration_open', false);
    try {
      const r = await call(s, { path: 'register', body: { email: email(), password: PASSWORD } });
      expectAError(r, 403, 'registration_closed');
    } finally {
      await s.settings.set('auth.registration_open', true);
    }
  });

  test('verification required: no tokens at registration, 403 email_not_verified at login', async () => {
    await s.settings.set('auth.email_verification_required', true);
    try {
      const address = email();
      const r = await registerUser(s, { email: address });
      expect(r.body.data.verification_required).toBe(true);
      expect(r.body.data.access_token).toBeUndefined();
      const wrong = await call(s, { path: 'login', body: { email: address, password: 'wrong password' } });
      expectAError(wrong, 401, 'invalid_credentials'); // only the password's owner learns the state
      const l = await call(s, { path: 'login', body: { email: address, password: PASSWORD } });
      expectAError(l, 403, 'email_not_verified');
    } finally {
      await s.settings.set('auth.email_verification_required', false);
    }
  });

  test('disabled user: login 403, its access and refresh tokens stop at once; enabled again works', async () => {
    const u = await signInUser(s);
    expect((await call(s, { method: 'GET', path: 'me', token: u.access_token })).status).toBe(200);
    await setDisabled(s, u.user.id, true);
    expectAError(await call(s, { method: 'GET', path: 'me', token: u.access_token }), 401, 'session_revoked');
    const l = await call(s, { path: 'login', body: { email: u.email, password: PASSWORD } });
    expectAError(l, 403, 'account_disabled');
    await setDisabled(s, u.user.id, false);
    expect((await call(s, { path: 'login', body: { email: u.email, password: PASSWORD } })).status).toBe(200);
  });
  describe('access mode api_key_required', () => {
    let key: string;
    beforeAll(async () => {
      key = await createKey(s, { type: 'public' });
      await s.settings.set('web.public_api_access_mode', 'api_key_required');
    });
    afterAll(() => s.settings.set('web.public_api_access_mode', 'open'));

    const cases: [string, string, string, () => Record<string, string>, number, string | null][] = [
      ['register without key', 'POST', 'register', () => ({}), 401, 'api_key_required'],
      ['login without key', 'POST', 'login', () => ({}), 401, 'api_key_required'],
      ['me without key', 'GET', 'me', () => ({}), 401, 'api_key_required'],
      ['forgot without key', 'POST', 'password/forgot', () => ({}), 401, 'api_key_required'],
      ['register with a wrong key', 'POST', 'register', () => ({ 'x-api-key': 'pk_wrong' }), 401, 'unauthorized'],
      ['register with the site public key', 'POST', 'register', () => ({ 'x-api-key': key }), 201, null],
    ];
    test.each(cases)('%s', async (_name, method, path, headers, status, code) => {
      const body = method === 'POST' ? { email: email(), password: PASSWORD } : undefined;
      const r = await call(s, { method, path, body, headers: headers() });
      if (code) expectAError(r, status, code);
      else expect(r.status).toBe(status);
    });

    test('login and me with the key', async () => {
      const address = email();
      await call(s, { path: 'register', body: { email: address, password: PASSWORD }, headers: { 'x-api-key': key } });
      const l = await call(s, {
        path: 'login',
        body: { email: address, password: PASSWORD },
        headers: { 'x-api-key': key },
      });
      expect(l.status).toBe(200);
      const me = await call(s, {
        method: 'GET',
        path: 'me',
        token: l.body.data.access_token,
        headers: { 'x-api-key': key },
      });
      expect(me.body.data.user.email).toBe(address);
    });
  });
});

describe('signing key', () => {
  test('a configured auth.jwt_secret shorter than 32 characters stops start-up with a clear message', async () => {
    const { freshDb } = await import('../helpers/engines');
    const message = 'auth.jwt_secret: must be at least 32 characters (or leave it empty to use a generated one)';
    const db = await freshDb('embedded');
    try {
      // On the executable: the one line `basalt serve` printed before it exited.
      const err = await startAuthServer('embedded', { db, env: { BASALT_AUTH_JWT_SECRET: 'too-short' } }).then(
        (s) => s.stop().then(() => new Error('started')),
        (e) => e,
      );
      expect(err).toBeInstanceOf(Error);
      if (ON_SOURCE) expect(err.message).toBe(message);
      else expect(err.message.split('\n')).toContain(`basalt: ${message}`);
    } finally {
      await db.drop();
    }
  });

  test('a configured auth.jwt_secret signs the access tokens', async () => {
    const secret = 'an operator chosen secret of 40 characters!';
    const s = await startAuthServer('embedded', { env: { BASALT_AUTH_JWT_SECRET: secret } });
    try {
      const u = await signInUser(s);
      const { jwtVerify } = await import('jose');
      const { payload } = await jwtVerify(u.access_token, new TextEncoder().encode(secret));
      expect(payload).toEqual(expect.objectContaining({ sub: u.user.id, iss: 'basalt', sid: expect.any(String) }));
      expect(payload.exp! - payload.iat!).toBe(900);
    } finally {
      await s.stop();
    }
  });
});
