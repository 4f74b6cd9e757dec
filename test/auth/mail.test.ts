/**
 * Password reset and e-mail verification end to end: the mail goes through the
 * queue to a real SMTP sink, and the token in its link works exactly once. Rows
 * (tokens at rest, an expired token) are read and written beside the server where `canSql`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { canSql, ON_SOURCE, type Reply, type TestServer } from '../helpers/server';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { PASSWORD, call, email, ip, mailedToken, startAuthServer } from './support';
import { signInUser, registerUser } from '../helpers/users';
import { expectA, expectAError } from '../helpers/envelopes';

describe.each(ENGINES)('reset and verification mail on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  beforeAll(async () => {
    sink = await startSmtpSink();
    s = await startAuthServer(engine, { env: { BASALT_WEB_PUBLIC_BASE_URL: 'https://app.example.com' } });
  });
  afterAll(async () => {
    await s.stop();
    await sink.close();
  });

  test('without mail: forgot still answers 200; resend says mail_not_configured (503)', async () => {
    const address = email();
    await registerUser(s, { email: address });
    expect((await call(s, { path: 'password/forgot', body: { email: address } })).status).toBe(200);
    const r = await call(s, { path: 'verify-email/resend', body: { email: address } });
    expectAError(r, 503, 'mail_not_configured');
    // Mail is a live setting: configured now for the rest of this suite.
    await s.settings.set('mail.smtp_url', sink.url);
    await s.settings.set('mail.from', 'noreply@example.com');
    // One send at a time: the queue goes out in the order it was filled (the sentinels below).
    await s.settings.set('mail.concurrency', 1);
  });

  test('registration sends verify_email; its token verifies the address once', async () => {
    const address = email('verify');
    const r = await registerUser(s, { email: address });
    expect(r.body.data.user.email_verified).toBe(false);
    const me = () => call(s, { method: 'GET', path: 'me', token: r.body.data.access_token });
    expect((await me()).body.data.user.email_verified).toBe(false); // now cached
    const { mail, token, link } = await mailedToken(sink, address, 'verify-email');
    expect(mail.subject).toContain('Confirm your e-mail address');
    expect(link).toStartWith('https://app.example.com/verify-email?token=');
    expect(mail.text).toContain('1440 minutes');
    const cases: [unknown, (r: Reply) => void][] = [
      [{ token: 'AAAAAAAAAAAAAAAA.' + 'B'.repeat(43) }, (r) => expectAError(r, 400, 'invalid_token')],
      [
        { token },
        (r) =>
          expectA(r, 200, {
            user: expect.objectContaining({
              email: address,
              email_verified: true,
              email_verified_at: expect.any(String),
            }),
          }),
      ],
      [{ token }, (r) => expectAError(r, 400, 'invalid_token')],
      [{}, (r) => expectAError(r, 422, 'validation_error')],
    ];
    // Sent with the registrant's access token, as a signed-in front-end does: the account stays theirs (ownership.test.ts).
    const token0 = r.body.data.access_token;
    for (const [body, check] of cases) check(await call(s, { path: 'verify-email', body, token: token0 }));
    expect((await me()).body.data.user.email_verified).toBe(true); // the cached record was dropped at once
  });

  test('forgot → password_reset mail → reset: new password works, sessions end, token spent', async () => {
    const u = await signInUser(s, { email: email('reset') });
    const f = await call(s, { path: 'password/forgot', body: { email: ` ${u.email.toUpperCase()} ` } });
    expectA(f, 200);
    const { mail, token, link } = await mailedToken(sink, u.email, 'reset-password');
    expect(mail.subject).toContain('Reset your');
    expect(link).toStartWith('https://app.example.com/reset-password?token=');
    expect(mail.text).toContain('60 minutes');
    const cases: [unknown, (r: Reply) => void][] = [
      [
        { token, password: 'short' },
        (r) => expectAError(r, 422, 'validation_error', { details: { fields: { password: expect.any(String) } } }),
      ],
      [{ token: 'nope', password: 'a new password 1' }, (r) => expectAError(r, 400, 'invalid_token')],
      [
        { token, password: 'a new password 1' },
        (r) => expectA(r, 200, { user: expect.objectContaining({ email: u.email, email_verified: true }) }),
      ],
      [{ token, password: 'a new password 2' }, (r) => expectAError(r, 400, 'invalid_token')],
    ];
    for (const [body, check] of cases) check(await call(s, { path: 'password/reset', body }));
    expectAError(await call(s, { method: 'GET', path: 'me', token: u.access_token }), 401, 'session_revoked');
    expect((await call(s, { path: 'login', body: { email: u.email, password: PASSWORD } })).status).toBe(401);
    expect((await call(s, { path: 'login', body: { email: u.email, password: 'a new password 1' } })).status).toBe(200);
  });

  test('forgot for an unknown address: the same 200, and no mail', async () => {
    const known = email('known');
    await registerUser(s, { email: known });
    const ghost = email('ghost');
    const a = await call(s, { path: 'password/forgot', body: { email: ghost } });
    const b = await call(s, { path: 'password/forgot', body: { email: known } });
    expect([a.status, a.body]).toEqual([b.status, b.body]);
    // The known address's mail is the sentinel. The mail work runs after the answer, one task a
    // request, started in request order: in process it is waited for outright; on the executable
    // a mail to the ghost, begun first, would be queued first, and the queue goes out in order,
    // one at a time.
    await mailedToken(sink, known, 'reset-password');
    if (ON_SOURCE) await s.platform.services.auth.settled();
    expect(sink.messages.some((m) => m.to.includes(ghost))).toBe(false);
  });

  test('a reset token cannot verify an address, an expired token is refused, a reset unlocks the account', async () => {
    const address = email('cross');
    await registerUser(s, { email: address });
    const from = ip();
    for (let i = 0; i < 5; i++)
      await call(s, { path: 'login', ip: from, body: { email: address, password: 'wrong password' } });
    expectAError(
      await call(s, { path: 'login', ip: from, body: { email: address, password: PASSWORD } }),
      429,
      'account_locked',
      { retry_after: expect.any(Number) },
    );
    await call(s, { path: 'password/forgot', body: { email: address } });
    const { token } = await mailedToken(sink, address, 'reset-password');
    expectAError(await call(s, { path: 'verify-email', body: { token } }), 400, 'invalid_token');
    if (canSql(engine)) {
      await s.sql(`UPDATE basalt.auth_action_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [
        token.split('.')[0],
      ]);
      expectAError(
        await call(s, { path: 'password/reset', body: { token, password: 'another password' } }),
        400,
        'invalid_token',
      );
    }
    await call(s, { path: 'password/forgot', body: { email: address } });
    const { token: fresh } = await mailedToken(sink, address, 'reset-password', 2);
    expect(
      (await call(s, { path: 'password/reset', body: { token: fresh, password: 'another password' } })).status,
    ).toBe(200);
    // The reset lifted the lock of the address that failed.
    expect(
      (await call(s, { path: 'login', ip: from, body: { email: address, password: 'another password' } })).status,
    ).toBe(200);
  });

  test('resend: a new verification mail for an unverified account; 200 for anything else', async () => {
    const address = email('resend');
    await registerUser(s, { email: address });
    await mailedToken(sink, address, 'verify-email');
    const r = await call(s, { path: 'verify-email/resend', body: { email: address } });
    expectA(r, 200);
    const { token } = await mailedToken(sink, address, 'verify-email', 2);
    expect((await call(s, { path: 'verify-email', body: { token } })).status).toBe(200);
    const ghost = await call(s, { path: 'verify-email/resend', body: { email: email('ghost') } });
    expect([ghost.status, ghost.body]).toEqual([r.status, r.body]);
    expect((await call(s, { path: 'verify-email/resend', body: { email: 'not-an-address' } })).status).toBe(422);
  });

  test.if(canSql(engine))('the tokens are stored hashed', async () => {
    const address = email('hashed');
    await registerUser(s, { email: address });
    const { token } = await mailedToken(sink, address, 'verify-email');
    const rows = await s.sql<{ secret_hash: Uint8Array }>(
      'SELECT secret_hash FROM basalt.auth_action_tokens WHERE id = $1',
      [token.split('.')[0]],
    );
    expect(rows[0]!.secret_hash.length).toBe(32);
    expect(Buffer.from(rows[0]!.secret_hash).toString('base64url')).not.toBe(token.split('.')[1]);
  });
});

describe.each(ENGINES)('mail links without a configured base URL on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  beforeAll(async () => {
    sink = await startSmtpSink();
    s = await startAuthServer(engine, {
      env: {
        BASALT_MAIL_SMTP_URL: sink.url,
        BASALT_MAIL_FROM: 'noreply@example.com',
        BASALT_MAIL_CONCURRENCY: '1', // the queue goes out in the order it was filled (the sentinel below)
        BASALT_WEB_CORS_ORIGINS: 'http://shop.example',
      },
    });
  });
  afterAll(async () => {
    await s.stop();
    await sink.close();
  });
  const forgot = (address: string, host?: string) =>
    s.req('POST', '/api/v1/auth/password/forgot', { body: { email: address }, headers: host ? { host } : {} });
  /** Queued password_reset mails: all of them, read in process; on the executable, those to `address` (its admin API). */
  const jobs = async (address: string): Promise<number> =>
    ON_SOURCE
      ? (
          await s.sql<{ n: number }>(
            "SELECT count(*)::int AS n FROM basalt.mail_jobs WHERE template = 'password_reset'",
          )
        )[0]!.n
      : (await s.admin('GET', `/api/admin/mail/jobs?recipient=${encodeURIComponent(address)}`)).body.data.jobs.filter(
          (j: { template: string }) => j.template === 'password_reset',
        ).length;

  test('a loopback origin (development) gets its link', async () => {
    const address = email('loop');
    await registerUser(s, { email: address });
    expect((await forgot(address)).status).toBe(200);
    const { link } = await mailedToken(sink, address, 'reset-password');
    expect(link).toStartWith(`${s.url}/reset-password?token=`);
    if (!ON_SOURCE) expect(await jobs(address)).toBe(1); // the admin API's listing sees a queued reset mail
  });

  test('a front-end origin listed in web.cors_origins gets its link', async () => {
    const address = email('cors');
    await registerUser(s, { email: address });
    expect((await forgot(address, 'shop.example')).status).toBe(200);
    const { link } = await mailedToken(sink, address, 'reset-password');
    expect(link).toStartWith('http://shop.example/reset-password?token=');
  });

  test('any other Host header gets no mail (no reset link pointing at it), still 200', async () => {
    const address = email('poison');
    await registerUser(s, { email: address });
    const before = await jobs(address);
    const r = await forgot(address, 'evil.example');
    expect(r.status).toBe(200);
    // A sentinel: the same request from a trusted origin, whose mail is sent. The mail work runs
    // after the answer, one task a request, started in request order: in process it is waited
    // for outright; on the executable a mail for the first, begun first, would be queued first,
    // and the queue goes out in order, one at a time.
    expect((await forgot(address)).status).toBe(200);
    const { link } = await mailedToken(sink, address, 'reset-password');
    if (ON_SOURCE) await s.platform.services.auth.settled();
    expect(link).toStartWith(`${s.url}/reset-password?token=`);
    expect(await jobs(address)).toBe(before + 1);
    if (canSql(engine)) {
      const tokens = await s.sql<{ n: number }>(
        "SELECT count(*)::int AS n FROM basalt.auth_action_tokens t JOIN basalt.users u ON u.id = t.user_id WHERE u.email = $1 AND t.purpose = 'password_reset'",
        [address],
      );
      expect(tokens[0]!.n).toBe(1);
    }
    expect(
      sink.messages.filter((m) => m.to.includes(address) && m.text.includes('/reset-password?token=')),
    ).toHaveLength(1);
  });
});
