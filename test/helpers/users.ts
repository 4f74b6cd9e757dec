/**
 * A Public Auth user (docs/auth.md) on a test server: registered and signed in through
 * POST /api/v1/auth/register and /login, as a site would. (Administrators: ./admin.ts.)
 *
 * Each call comes from a fresh client address in X-Forwarded-For (100.64.0.0/10), so the
 * per-address limits never bite a suite that signs many users in; a server that does not
 * trust 127.0.0.1 as a proxy ignores the header.
 *
 * @example
 * const u = await signInUser(s);
 * const me = await s.req('GET', '/api/v1/auth/me', { headers: u.headers() });
 * expectA(me, 200);
 */
import { expect } from 'bun:test';
import { expectA } from './envelopes';
import type { Reply, TestServer } from './server';

export const USER_PASSWORD = 'correct horse battery';
let n = 0;

/** A fresh e-mail address, so per-account limits and locks never collide between tests. */
export function userEmail(tag = 'user'): string {
  return `${tag}-${Date.now().toString(36)}-${++n}@example.com`;
}

/** A fresh client address (shared address space, 100.64.0.0/10). */
export function userIp(): string {
  n++;
  return `100.${64 + ((n >> 16) & 63)}.${(n >> 8) & 255}.${n & 255}`;
}

export interface UserOptions {
  /** Default: a fresh address (userEmail()). */
  email?: string;
  /** Default: USER_PASSWORD. */
  password?: string;
  /** X-Forwarded-For of the requests; default: a fresh address (userIp()). */
  ip?: string;
}

export interface SignedInUser {
  email: string;
  password: string;
  access_token: string;
  refresh_token: string;
  user: { id: string; email: string; [field: string]: unknown };
  /** `Authorization: Bearer <access_token>`, plus `extra`. */
  headers(extra?: Record<string, string>): Record<string, string>;
}

/** POST /api/v1/auth/register, answered 201 in format A; returns the answer. */
export async function registerUser(s: TestServer, opts: UserOptions = {}): Promise<Reply> {
  const body = { email: opts.email ?? userEmail(), password: opts.password ?? USER_PASSWORD };
  const r = await s.req('POST', '/api/v1/auth/register', { body, headers: { 'x-forwarded-for': opts.ip ?? userIp() } });
  expectA(r, 201);
  return r;
}

/**
 * Register (unless `register: false`: the account exists) and log in; the session's
 * tokens, the user and its Bearer header.
 */
export async function signInUser(
  s: TestServer,
  opts: UserOptions & { register?: boolean } = {},
): Promise<SignedInUser> {
  const email = opts.email ?? userEmail();
  const password = opts.password ?? USER_PASSWORD;
  const ip = opts.ip ?? userIp();
  if (opts.register !== false) await registerUser(s, { email, password, ip });
  const r = await s.req('POST', '/api/v1/auth/login', {
    body: { email, password },
    headers: { 'x-forwarded-for': ip },
  });
  const data = expectA(
    r,
    200,
    expect.objectContaining({
      access_token: expect.any(String),
      refresh_token: expect.any(String),
      user: expect.objectContaining({ id: expect.any(String) }),
    }),
  );
  const access_token: string = data.access_token;
  return {
    email,
    password,
    access_token,
    refresh_token: data.refresh_token,
    user: data.user,
    headers: (extra = {}) => ({ authorization: `Bearer ${access_token}`, ...extra }),
  };
}
