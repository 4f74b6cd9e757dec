/**
 * Shared pieces of the Public Auth suites: a server whose client IP can be chosen
 * per request (X-Forwarded-For from a trusted 127.0.0.1), unique addresses, and a
 * short-hand for an auth request. Signed-in users: test/helpers/users.ts.
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { startServer, type Reply, type StartOptions, type TestServer } from '../helpers/server';
import { ENGINES, type Engine } from '../helpers/engines';
import { startSmtpSink, type SinkMessage, type SmtpSink } from '../helpers/smtp-sink';
import { startProvider, type TestProvider } from './provider';
import { eventually } from '../helpers/wait';

/** The password test/helpers/users.ts gives its users. */
export { USER_PASSWORD as PASSWORD } from '../helpers/users';
let counter = 0;

/** A fresh e-mail address, so per-account limits and locks never collide between tests. */
export function email(tag = 'user'): string {
  return `${tag}-${Date.now().toString(36)}-${++counter}@example.com`;
}

/** A fresh client IP (TEST-NET-2), so per-IP limits never collide between tests. */
export function ip(): string {
  counter++;
  return `198.51.${(counter >> 8) & 255}.${counter & 255}`;
}

export function startAuthServer(engine: Engine, opts: StartOptions = {}): Promise<TestServer> {
  return startServer(engine, { ...opts, env: { BASALT_WEB_TRUSTED_PROXIES: '127.0.0.1', ...(opts.env ?? {}) } });
}

/**
 * Two auth servers on one fresh external database, started before the enclosing
 * describe's tests and stopped after them; without external PostgreSQL `external` is
 * false and nothing starts (tests skip on it). Call inside a describe; `env` (read when
 * they start) is both servers' extra environment.
 */
export function twoInstances(env: () => Record<string, string> = () => ({})): {
  external: boolean;
  a: TestServer;
  b: TestServer;
} {
  const two = { external: ENGINES.includes('external') } as { external: boolean; a: TestServer; b: TestServer };
  beforeAll(async () => {
    if (!two.external) return;
    two.a = await startAuthServer('external', { env: env() });
    two.b = await startAuthServer('external', { db: two.a.db, env: env() });
  });
  afterAll(async () => {
    if (!two.external) return;
    await two.b.stop();
    await two.a.stop();
  });
  return two;
}

export interface Call {
  method?: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  ip?: string;
  token?: string;
}

/** One request; `ip` becomes X-Forwarded-For, `token` a Bearer header. */
export function call(s: TestServer, c: Call): Promise<Reply> {
  const headers: Record<string, string> = { 'x-forwarded-for': c.ip ?? ip(), ...(c.headers ?? {}) };
  if (c.token) headers.authorization = `Bearer ${c.token}`;
  return s.req(c.method ?? 'POST', `/api/v1/auth/${c.path}`, { body: c.body, headers });
}

/** Mark a user's address verified as an operator would: in process, or through the executable's admin API. */
export async function markVerified(s: TestServer, userId: string): Promise<void> {
  if (s.target === 'source')
    await s.platform.db.query('UPDATE basalt.users SET email_verified_at = now() WHERE id = $1', [userId]);
  else await s.admin('POST', `/api/admin/users/${userId}/verify`);
}

/** Disable or enable a user as an operator would: in process, or through the executable's admin API. */
export async function setDisabled(s: TestServer, userId: string, disabled: boolean): Promise<void> {
  if (s.target === 'source') await s.platform.services.auth.setDisabled(userId, disabled);
  else await s.admin('POST', `/api/admin/users/${userId}/${disabled ? 'disable' : 'enable'}`);
}

/** Environment that sends a server's mail to `sink`, with links to https://app.example.com. */
export function mailEnv(sink: SmtpSink): Record<string, string> {
  return {
    BASALT_MAIL_SMTP_URL: sink.url,
    BASALT_MAIL_FROM: 'noreply@example.com',
    BASALT_WEB_PUBLIC_BASE_URL: 'https://app.example.com',
  };
}

/** The n-th mail of a kind to `to` (waits for it), and the token of its link. */
export async function mailedToken(
  sink: SmtpSink,
  to: string,
  kind: 'verify-email' | 'reset-password',
  nth = 1,
): Promise<{ mail: SinkMessage; token: string; link: string }> {
  const mails = await eventually(
    () => sink.messages.filter((m) => m.to.includes(to) && m.text.includes(`/${kind}?token=`)),
    {
      until: (mails) => mails.length >= nth,
      what: `${kind} mail #${nth} to ${to}`,
    },
  );
  const mail = mails[mails.length - 1]!;
  const link = /https?:\/\/\S+token=[^\s"<]+/.exec(mail.text)![0];
  return { mail, link, token: decodeURIComponent(new URL(link).searchParams.get('token')!) };
}

/** A live password reset token for a user, as its owner gets one: password/forgot, then the mail's link. */
export async function resetToken(s: TestServer, sink: SmtpSink, u: { email: string }, nth = 1): Promise<string> {
  expect((await call(s, { path: 'password/forgot', body: { email: u.email } })).status).toBe(200);
  return (await mailedToken(sink, u.email, 'reset-password', nth)).token;
}

/** A server with an SMTP sink for its mail and a test OpenID provider as sign-in providers. */
export interface MailAndProvider {
  s: TestServer;
  sink: SmtpSink;
  idp: TestProvider;
  stop(): Promise<void>;
}

/**
 * Start a sink, a provider and a server mailing to the sink (from noreply@example.com, plus
 * `env`), with the provider under `providers` names and `allowlist` as auth.redirect_allowlist.
 */
export async function startWithMailAndProvider(
  engine: Engine,
  opts: { providers: string[]; allowlist: string[]; env?: Record<string, string> },
): Promise<MailAndProvider> {
  const sink = await startSmtpSink();
  const idp = await startProvider();
  const s = await startAuthServer(engine, {
    env: { BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: 'noreply@example.com', ...opts.env },
  });
  await s.settings.set('auth.oauth_providers', idp.settings(opts.providers));
  await s.settings.set('auth.redirect_allowlist', opts.allowlist);
  return {
    s,
    sink,
    idp,
    stop: async () => {
      await s.stop();
      await sink.close();
      await idp.stop();
    },
  };
}
