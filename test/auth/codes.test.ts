/**
 * E-mail sign-in codes through the mail queue to a real SMTP sink, and the TOTP second
 * factor with codes computed here by RFC 6238 (otpauth, from the secret the server gave),
 * never asked of the server: enrolment, the mfa_required step for password, e-mail code
 * and provider sign-ins, replay, recovery codes, lockout, amr/aal claims.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Secret, TOTP } from 'otpauth';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, type TestServer } from '../helpers/server';
import { migratePlatform } from '../../src/db/migrate';
import type { SmtpSink } from '../helpers/smtp-sink';
import { expectA, expectAError } from '../helpers/envelopes';
import { eventually } from '../helpers/wait';
import { signInUser } from '../helpers/users';
import { call, email, ip, markVerified, PASSWORD, startWithMailAndProvider, type MailAndProvider } from './support';
import { claimsOf, fragment, walk, type TestProvider } from './provider';

/** The code the authenticator app would show `offset` steps from now. */
function totpCode(secret: string, offset = 0): string {
  const totp = new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 });
  return totp.generate({ timestamp: Date.now() + offset * 30_000 });
}

/**
 * Wait, when the current 30 s step ends within 8 s, for the next one to begin: a test then
 * uses the codes of steps -1, 0 and +1 (each once, in that order) well inside the window.
 */
async function freshStep(): Promise<void> {
  const left = 30_000 - (Date.now() % 30_000);
  if (left < 8_000) await Bun.sleep(left + 50);
}

/** A code that is none of the accepted ones (±1 step). */
function wrongCode(secret: string): string {
  const near = new Set([-1, 0, 1].map((o) => totpCode(secret, o)));
  for (let n = 0; ; n++) {
    const c = String(n).padStart(6, '0');
    if (!near.has(c)) return c;
  }
}

describe.each(ENGINES)('e-mail codes and second factor on %s', (engine) => {
  let world: MailAndProvider;
  let s: TestServer;
  let sink: SmtpSink;
  let idp: TestProvider;
  beforeAll(async () => {
    world = await startWithMailAndProvider(engine, {
      providers: ['test'],
      allowlist: ['https://app.example.com'],
      env: { BASALT_APP_NAME: 'Basalt Test' },
    });
    ({ s, sink, idp } = world);
  }, 180_000);
  afterAll(() => world.stop());

  /** The n-th auth.otp mail to `to`, and its code. */
  async function mailedCode(to: string, nth = 1): Promise<string> {
    const mails = await eventually(
      () => sink.messages.filter((m) => m.to.includes(to) && m.subject.includes('sign-in code')),
      {
        until: (m) => m.length >= nth,
        what: `sign-in code mail #${nth} to ${to}`,
      },
    );
    const mail = mails[nth - 1]!;
    expect(mail.subject).toContain('Basalt Test sign-in code');
    return /\b(\d{6})\b/.exec(mail.text)![1]!;
  }

  test('an e-mail code signs in (and up) once, marks the address verified; unknown and known addresses answer alike', async () => {
    const user = await signInUser(s);
    const stranger = email('stranger');
    const r1 = await call(s, { path: 'otp/request', body: { email: user.email } });
    const r2 = await call(s, { path: 'otp/request', body: { email: stranger } });
    expectA(r1, 202);
    expect({ status: r2.status, body: r2.body }).toEqual({ status: r1.status, body: r1.body });
    const code = await mailedCode(user.email);
    if (ON_SOURCE) {
      const hashed = await s.platform.db.query<{ code_hash: Uint8Array }>(
        'SELECT code_hash FROM basalt.auth_email_codes WHERE email = $1',
        [user.email],
      );
      expect(Buffer.from(hashed.rows[0]!.code_hash).toString()).not.toContain(code); // only an HMAC at rest
    }
    const v = await call(s, { path: 'otp/verify', body: { email: user.email.toUpperCase(), code } });
    expectA(
      v,
      200,
      expect.objectContaining({ user: expect.objectContaining({ id: user.user.id, email_verified: true }) }),
    );
    expect(claimsOf(v.body.data.access_token)).toMatchObject({ amr: ['otp'], aal: 1 });
    expectAError(await call(s, { path: 'otp/verify', body: { email: user.email, code } }), 401, 'invalid_code');
    // Registration is open: the stranger's code creates a verified, passwordless account.
    const signUp = await call(s, { path: 'otp/verify', body: { email: stranger, code: await mailedCode(stranger) } });
    expectA(
      signUp,
      200,
      expect.objectContaining({ user: expect.objectContaining({ email: stranger, email_verified: true }) }),
    );
  });

  test('the fifth wrong code burns the code: even the right one then fails', async () => {
    // Each try from another client address: the per-account limit (5/min from one address) stays out of it.
    const user = await signInUser(s);
    await call(s, { path: 'otp/request', body: { email: user.email } });
    const code = await mailedCode(user.email);
    const wrong = code === '000000' ? '000001' : '000000';
    for (let i = 0; i < 5; i++)
      expectAError(
        await call(s, { path: 'otp/verify', body: { email: user.email, code: wrong } }),
        401,
        'invalid_code',
      );
    expectAError(await call(s, { path: 'otp/verify', body: { email: user.email, code } }), 401, 'invalid_code');
    // Four wrong tries leave a new code usable.
    await call(s, { path: 'otp/request', body: { email: user.email } });
    const next = await mailedCode(user.email, 2);
    const other = next === '000000' ? '000001' : '000000';
    for (let i = 0; i < 4; i++) await call(s, { path: 'otp/verify', body: { email: user.email, code: other } });
    expectA(await call(s, { path: 'otp/verify', body: { email: user.email, code: next } }), 200);
  });

  test('the per-account limit on verifies counts per client address: one address past it leaves the owner elsewhere alone', async () => {
    await s.settings.set('auth.rate_limit_login_per_account', 2);
    try {
      const user = await signInUser(s);
      await call(s, { path: 'otp/request', body: { email: user.email } });
      const code = await mailedCode(user.email);
      const wrong = code === '000000' ? '000001' : '000000';
      const from = ip();
      // Two tries from one address (below the lockout and the code's five), the third is over the limit.
      for (let i = 0; i < 2; i++)
        expectAError(
          await call(s, { path: 'otp/verify', ip: from, body: { email: user.email, code: wrong } }),
          401,
          'invalid_code',
        );
      const limited = await call(s, { path: 'otp/verify', ip: from, body: { email: user.email, code } });
      expectAError(limited, 429, 'rate_limited');
      expect(limited.body.error.retry_after).toBeGreaterThan(0);
      // Another client address has an allowance of its own: the owner signs in with the code.
      expectA(await call(s, { path: 'otp/verify', ip: ip(), body: { email: user.email, code } }), 200);
    } finally {
      await s.settings.unset('auth.rate_limit_login_per_account');
    }
  });

  test('wrong e-mail codes count toward the lockout like wrong passwords: per client address, and the backstop', async () => {
    const user = await signInUser(s);
    await call(s, { path: 'otp/request', body: { email: user.email } });
    const code = await mailedCode(user.email);
    const wrong = code === '000000' ? '000001' : '000000';
    const from = ip();
    // Two wrong passwords and three wrong codes from one address: the same five failures.
    for (let i = 0; i < 2; i++)
      expectAError(
        await call(s, { path: 'login', ip: from, body: { email: user.email, password: 'wrong password 1' } }),
        401,
        'invalid_credentials',
      );
    for (let i = 0; i < 3; i++)
      expectAError(
        await call(s, { path: 'otp/verify', ip: from, body: { email: user.email, code: wrong } }),
        401,
        'invalid_code',
      );
    // That address is locked out: the right code and the right password are refused alike.
    const locked = await call(s, { path: 'otp/verify', ip: from, body: { email: user.email, code } });
    expectAError(locked, 429, 'account_locked');
    expect(locked.body.error.retry_after).toBeGreaterThan(850);
    expect(locked.headers.get('retry-after')).toBe(String(locked.body.error.retry_after));
    expectAError(
      await call(s, { path: 'login', ip: from, body: { email: user.email, password: PASSWORD } }),
      429,
      'account_locked',
    );
    // The owner elsewhere is not affected, and the refused try did not spend or burn the code.
    expectA(await call(s, { path: 'otp/verify', body: { email: user.email, code } }), 200);

    // The backstop counts wrong codes from every address together.
    await s.settings.set('auth.lockout_backstop_threshold', 3);
    try {
      const other = await signInUser(s);
      await call(s, { path: 'otp/request', body: { email: other.email } });
      const right = await mailedCode(other.email);
      const no = right === '000000' ? '000001' : '000000';
      for (let i = 0; i < 3; i++)
        expectAError(
          await call(s, { path: 'otp/verify', ip: ip(), body: { email: other.email, code: no } }),
          401,
          'invalid_code',
        );
      expectAError(
        await call(s, { path: 'otp/verify', ip: ip(), body: { email: other.email, code: right } }),
        429,
        'account_locked',
      );
    } finally {
      await s.settings.unset('auth.lockout_backstop_threshold');
    }
  });

  test('requests and verifies are rate limited per IP (429 with retry_after)', async () => {
    const from = ip();
    let last = await call(s, { path: 'otp/request', body: { email: email() }, ip: from });
    for (let i = 0; i < 5; i++) last = await call(s, { path: 'otp/request', body: { email: email() }, ip: from });
    expectAError(last, 429, 'rate_limited');
    expect(last.body.error.retry_after).toBeGreaterThan(0);
    expect(last.headers.get('retry-after')).toBe(String(last.body.error.retry_after));
    const vfrom = ip();
    for (let i = 0; i < 10; i++)
      await call(s, { path: 'otp/verify', body: { email: email(), code: '123456' }, ip: vfrom });
    expectAError(
      await call(s, { path: 'otp/verify', body: { email: email(), code: '123456' }, ip: vfrom }),
      429,
      'rate_limited',
    );
  });

  test('TOTP: enroll, confirm once, then every sign-in method asks for it; codes work once; recovery codes; amr/aal', async () => {
    const user = await signInUser(s);
    // Verified first: the first proof of the mailbox (the e-mail code below) would hand the account over (ownership.test.ts).
    await markVerified(s, user.user.id);
    const token = user.access_token;
    await freshStep();
    const enroll = await call(s, { path: 'mfa/totp/enroll', token });
    const { secret, otpauth_url } = expectA(enroll, 200, {
      secret: expect.any(String),
      otpauth_url: expect.any(String),
    });
    expect(otpauth_url).toStartWith('otpauth://totp/');
    expect(otpauth_url).toContain(`secret=${secret}`);
    expectAError(
      await call(s, { path: 'mfa/totp/confirm', token, body: { code: wrongCode(secret) } }),
      401,
      'invalid_code',
    );
    const confirmed = await call(s, { path: 'mfa/totp/confirm', token, body: { code: totpCode(secret, -1) } });
    const { recovery_codes } = expectA(confirmed, 200, { recovery_codes: expect.any(Array) });
    expect(recovery_codes).toHaveLength(10);
    expect(new Set(recovery_codes).size).toBe(10);
    if (ON_SOURCE) {
      const stored = await s.platform.db.query<{ code_hash: Uint8Array }>(
        'SELECT code_hash FROM basalt.auth_recovery_codes WHERE user_id = $1',
        [user.user.id],
      );
      expect(stored.rows).toHaveLength(10);
      expect(stored.rows.some((r) => Buffer.from(r.code_hash).toString().includes(recovery_codes[0]))).toBe(false);
    }
    expectAError(await call(s, { path: 'mfa/totp/enroll', token }), 409, 'mfa_already_enabled');

    // Password login: no tokens, the MFA step.
    const login = () => call(s, { path: 'login', body: { email: user.email, password: PASSWORD } });
    const step = expectA(await login(), 200, { mfa_required: true, mfa_token: expect.any(String), expires_in: 300 });
    expect(JSON.stringify(step)).not.toContain('access_token');
    // The confirmation spent its code: the same code is refused (replay); a later step's code works once.
    const reused = await call(s, {
      path: 'mfa/verify',
      body: { mfa_token: step.mfa_token, code: totpCode(secret, -1) },
    });
    expectAError(reused, 401, 'invalid_code');
    const next = totpCode(secret, 0);
    const done = await call(s, { path: 'mfa/verify', body: { mfa_token: step.mfa_token, code: next } });
    expectA(done, 200, expect.objectContaining({ access_token: expect.any(String) }));
    expect(claimsOf(done.body.data.access_token)).toMatchObject({ amr: ['pwd', 'totp'], aal: 2 });
    const refreshed = await call(s, { path: 'refresh', body: { refresh_token: done.body.data.refresh_token } });
    expect(claimsOf(refreshed.body.data.access_token)).toMatchObject({ amr: ['pwd', 'totp'], aal: 2 });
    // The mfa_token was spent, and the code too.
    expectAError(
      await call(s, { path: 'mfa/verify', body: { mfa_token: step.mfa_token, code: next } }),
      401,
      'invalid_mfa_token',
    );
    const step2 = expectA(await login(), 200).mfa_token;
    expectAError(await call(s, { path: 'mfa/verify', body: { mfa_token: step2, code: next } }), 401, 'invalid_code');
    // A recovery code: accepted once, typed in any case and without the dash.
    const rc = recovery_codes[0] as string;
    const viaRecovery = await call(s, {
      path: 'mfa/verify',
      body: { mfa_token: step2, recovery_code: rc.toUpperCase().replace('-', '') },
    });
    expect(claimsOf(expectA(viaRecovery, 200).access_token)).toMatchObject({ amr: ['pwd', 'recovery'], aal: 2 });
    const step3 = expectA(await login(), 200).mfa_token;
    expectAError(
      await call(s, { path: 'mfa/verify', body: { mfa_token: step3, recovery_code: rc } }),
      401,
      'invalid_code',
    );
    const methods = await call(s, { method: 'GET', path: 'identities', token });
    expect(methods.body.data).toMatchObject({ has_password: true, totp_enabled: true, recovery_codes_left: 9 });

    // E-mail code sign-in asks for the second factor too.
    const before = sink.messages.filter((m) => m.to.includes(user.email) && m.subject.includes('sign-in code')).length;
    await call(s, { path: 'otp/request', body: { email: user.email } });
    const viaOtp = await call(s, {
      path: 'otp/verify',
      body: { email: user.email, code: await mailedCode(user.email, before + 1) },
    });
    expectA(viaOtp, 200, { mfa_required: true, mfa_token: expect.any(String), expires_in: 300 });
  });

  test.if(ON_SOURCE)(
    'TOTP secrets are sealed at rest, bound to their user; migration 160 seals a plain one',
    async () => {
      const q = (sql: string, params: unknown[] = []) => s.platform.db.query<any>(sql, params);
      const a = await signInUser(s);
      const b = await signInUser(s);
      const { secret } = expectA(await call(s, { path: 'mfa/totp/enroll', token: a.access_token }), 200);
      expectA(await call(s, { path: 'mfa/totp/enroll', token: b.access_token }), 200);
      const stored = (await q('SELECT secret FROM basalt.auth_totp WHERE user_id = $1', [a.user.id])).rows[0].secret;
      expect(stored).toStartWith('v1.');
      expect(stored).not.toContain(secret);
      // A sealed secret copied onto another user's row does not open there.
      await q('UPDATE basalt.auth_totp SET secret = $2 WHERE user_id = $1', [b.user.id, stored]);
      await freshStep();
      expectAError(
        await call(s, { path: 'mfa/totp/confirm', token: b.access_token, body: { code: totpCode(secret, 0) } }),
        401,
        'invalid_code',
      );
      // A secret stored plain (before 160) is sealed by the migration and still works.
      await q('UPDATE basalt.auth_totp SET secret = $2 WHERE user_id = $1', [a.user.id, secret]);
      await q(`DELETE FROM basalt.platform_migrations WHERE name = '160_totp_sealed'`);
      expect(await migratePlatform(s.platform.db)).toEqual(['160_totp_sealed']);
      const resealed = (await q('SELECT secret FROM basalt.auth_totp WHERE user_id = $1', [a.user.id])).rows[0].secret;
      expect(resealed).toStartWith('v1.');
      expect(resealed).not.toBe(stored);
      expect(
        (await call(s, { path: 'mfa/totp/confirm', token: a.access_token, body: { code: totpCode(secret, 0) } }))
          .status,
      ).toBe(200);
    },
  );

  test('wrong second-factor codes count toward the lockout; a locked account is refused even with the right code', async () => {
    const user = await signInUser(s);
    await freshStep();
    const { secret } = expectA(await call(s, { path: 'mfa/totp/enroll', token: user.access_token }), 200);
    await call(s, { path: 'mfa/totp/confirm', token: user.access_token, body: { code: totpCode(secret, -1) } });
    const from = ip();
    const step = expectA(
      await call(s, { path: 'login', ip: from, body: { email: user.email, password: PASSWORD } }),
      200,
    );
    const bad = wrongCode(secret);
    for (let i = 0; i < 4; i++)
      expectAError(
        await call(s, { path: 'mfa/verify', ip: from, body: { mfa_token: step.mfa_token, code: bad } }),
        401,
        'invalid_code',
      );
    // Signing in with the password again does not clear the count (only a completed sign-in does).
    const step2 = expectA(
      await call(s, { path: 'login', ip: from, body: { email: user.email, password: PASSWORD } }),
      200,
    );
    expectAError(
      await call(s, { path: 'mfa/verify', ip: from, body: { mfa_token: step2.mfa_token, code: bad } }),
      401,
      'invalid_code',
    );
    const locked = await call(s, {
      path: 'mfa/verify',
      ip: from,
      body: { mfa_token: step2.mfa_token, code: totpCode(secret, 0) },
    });
    expectAError(locked, 429, 'account_locked');
    expect(locked.body.error.retry_after).toBeGreaterThan(0);
    // Only that address is locked out: the owner's second factor from elsewhere still works.
    expect(
      (
        await call(s, {
          path: 'mfa/verify',
          ip: ip(),
          body: { mfa_token: step2.mfa_token, code: totpCode(secret, 0) },
        })
      ).status,
    ).toBe(200);
  });

  test('provider sign-in asks for the second factor at the exchange', async () => {
    const address = email('mfa-oidc');
    idp.as({ sub: `mfa-${address}`, email: address, email_verified: true });
    const first = await call(s, {
      path: 'oauth/exchange',
      body: { code: fragment((await walk(s, 'test', 'https://app.example.com/')).final.location).get('code')! },
    });
    const token = expectA(first, 200).access_token;
    await freshStep();
    const { secret } = expectA(await call(s, { path: 'mfa/totp/enroll', token }), 200);
    expectA(await call(s, { path: 'mfa/totp/confirm', token, body: { code: totpCode(secret, -1) } }), 200);
    const w = await walk(s, 'test', 'https://app.example.com/');
    const step = expectA(
      await call(s, { path: 'oauth/exchange', body: { code: fragment(w.final.location).get('code')! } }),
      200,
    );
    expect(step).toMatchObject({ mfa_required: true });
    const done = await call(s, { path: 'mfa/verify', body: { mfa_token: step.mfa_token, code: totpCode(secret, 0) } });
    expect(claimsOf(expectA(done, 200).access_token)).toMatchObject({ amr: ['oauth', 'totp'], aal: 2 });
    // Turning it off needs a code; a wrong one is refused.
    const t2 = done.body.data.access_token;
    expectAError(
      await call(s, { method: 'DELETE', path: 'mfa/totp', token: t2, body: { code: wrongCode(secret) } }),
      401,
      'invalid_code',
    );
    expectAError(
      await call(s, { method: 'DELETE', path: 'mfa/totp', token: t2, body: { code: totpCode(secret, 0) } }),
      401,
      'invalid_code',
    ); // already used
    expectA(await call(s, { method: 'DELETE', path: 'mfa/totp', token: t2, body: { code: totpCode(secret, 1) } }), 200);
    const after = await call(s, {
      path: 'oauth/exchange',
      body: { code: fragment((await walk(s, 'test', 'https://app.example.com/')).final.location).get('code')! },
    });
    expectA(after, 200, expect.objectContaining({ access_token: expect.any(String) }));
  });
});
