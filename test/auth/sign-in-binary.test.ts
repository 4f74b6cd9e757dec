/**
 * The headline cases of sign-in beyond passwords against the compiled executable, alone
 * in an empty directory, on both engines: oauth4webapi, otpauth and the migration inside
 * `bun build --compile`, configured the way an operator would (environment variables).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { Secret, TOTP } from 'otpauth';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { installBinary, serveBinary } from '../helpers/binary';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { eventually } from '../helpers/wait';
import { claimsOf, fragment, hop, startProvider, walk, type TestProvider } from './provider';

const BACK = 'https://app.example.com/auth/done';

describe.each(ENGINES)('sign-in methods in the executable on %s', (engine) => {
  let idp: TestProvider;
  let sink: SmtpSink;
  let db: FreshDb;
  let url: string;
  let proc: Subprocess;
  beforeAll(async () => {
    idp = await startProvider();
    sink = await startSmtpSink();
    db = await freshDb(engine);
    const { dir, exe } = await installBinary();
    const served = await serveBinary(
      exe,
      dir,
      {
        ...db.env,
        BASALT_AUTH_OAUTH_PROVIDERS: JSON.stringify(idp.settings(['test'])),
        BASALT_AUTH_REDIRECT_ALLOWLIST: 'https://app.example.com/auth/',
        BASALT_MAIL_SMTP_URL: sink.url,
        BASALT_MAIL_FROM: 'noreply@example.com',
        BASALT_WEB_TRUSTED_PROXIES: '127.0.0.1',
      },
      120_000,
    );
    url = served.url;
    proc = served.proc;
  }, 600_000);
  afterAll(async () => {
    proc?.kill('SIGTERM');
    await proc?.exited;
    await idp.stop();
    await sink.close();
    await db.drop();
  });

  let n = 0;
  const post = async (path: string, body: unknown, token?: string) => {
    const r = await fetch(`${url}/api/v1/auth/${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-forwarded-for': `198.18.0.${++n}`,
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: JSON.stringify(body),
    });
    return { status: r.status, body: (await r.json()) as any };
  };

  test('provider sign-in: fragment code once, allow-list, state, pre-hijacking', async () => {
    idp.as({ sub: 'bin-1', email: 'bin-1@example.com', email_verified: true });
    const w = await walk(url, 'test', BACK);
    const code = fragment(w.final.location).get('code')!;
    const r = await post('oauth/exchange', { code });
    expect(r.status).toBe(200);
    expect(r.body.data.user).toMatchObject({ email: 'bin-1@example.com', email_verified: true });
    expect(claimsOf(r.body.data.access_token)).toMatchObject({ amr: ['oauth'], aal: 1 });
    expect((await post('oauth/exchange', { code })).body.error.code).toBe('invalid_exchange_code');
    const bad = await hop(
      `${url}/api/v1/auth/oauth/test/start?redirect_to=${encodeURIComponent('https://evil.example.com/')}`,
    );
    expect([bad.status, JSON.parse(bad.body).error.code]).toEqual([400, 'invalid_redirect']);
    expect((await hop(`${url}/api/v1/auth/oauth/test/callback?code=x`)).status).toBe(400);
    expect((await walk(url, 'test', BACK, { cookie: '' })).final.location).toBe(`${BACK}#error=invalid_state`);
    // An address the provider does not vouch for links nothing (docs/auth.md, Account ownership).
    expect((await post('register', { email: 'bin-victim@example.com', password: 'attacker password' })).status).toBe(
      201,
    );
    idp.as({ sub: 'bin-victim', email: 'bin-victim@example.com', email_verified: false });
    expect(fragment((await walk(url, 'test', BACK)).final.location).get('error')).toBe('email_not_verified');
  });

  /**
   * The n-th sign-in code mailed to `email`. Only this test's own mails count: the sink is
   * shared, and a mail of an earlier test (the verification mail of a registration) may
   * arrive late.
   */
  const mailedCode = async (email: string, nth: number) => {
    const mails = await eventually(
      () => sink.messages.filter((m) => m.to.includes(email) && m.subject.includes('sign-in code')),
      { until: (m) => m.length >= nth, what: `sign-in code mail #${nth} to ${email}` },
    );
    return /\b(\d{6})\b/.exec(mails[nth - 1]!.text)![1]!;
  };

  test('e-mail code and TOTP second factor', async () => {
    const email = 'bin-otp@example.com';
    expect((await post('otp/request', { email })).status).toBe(202);
    const code = await mailedCode(email, 1);
    const signedIn = await post('otp/verify', { email, code });
    expect(signedIn.status).toBe(200);
    const token = signedIn.body.data.access_token;
    // Steps -1, 0, +1 each used once: start early enough in a 30 s step.
    const left = 30_000 - (Date.now() % 30_000);
    if (left < 8_000) await Bun.sleep(left + 50);
    const { secret } = (await post('mfa/totp/enroll', {}, token)).body.data;
    const totp = (offset: number) =>
      new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({
        timestamp: Date.now() + offset * 30_000,
      });
    const confirmed = await post('mfa/totp/confirm', { code: totp(-1) }, token);
    expect(confirmed.body.data.recovery_codes).toHaveLength(10);
    await post('otp/request', { email });
    const step = await post('otp/verify', { email, code: await mailedCode(email, 2) });
    expect(step.body.data).toMatchObject({ mfa_required: true });
    expect(step.body.data.access_token).toBeUndefined();
    expect((await post('mfa/verify', { mfa_token: step.body.data.mfa_token, code: totp(-1) })).body.error.code).toBe(
      'invalid_code',
    ); // replayed
    const done = await post('mfa/verify', { mfa_token: step.body.data.mfa_token, code: totp(0) });
    expect(done.status).toBe(200);
    expect(claimsOf(done.body.data.access_token)).toMatchObject({ amr: ['otp', 'totp'], aal: 2 });
  });
});
