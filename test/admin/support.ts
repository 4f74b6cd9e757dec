/**
 * Shared pieces of the admin suites: a server that believes X-Forwarded-For /
 * X-Forwarded-Proto from 127.0.0.1 (so each test picks its client address), fresh
 * addresses, a sign-in request and the audit rows.
 */
import { startServer, type Reply, type StartOptions, type TestServer } from '../helpers/server';
import type { Engine } from '../helpers/engines';

let counter = 0;

export function adminEmail(tag = 'admin'): string {
  return `${tag}-${Date.now().toString(36)}-${++counter}@example.com`;
}

/** A fresh client IP (TEST-NET-3), so per-IP limits never collide between tests. */
export function ip(): string {
  counter++;
  return `203.0.${(counter >> 8) & 255}.${counter & 255}`;
}

export function startAdminServer(engine: Engine, opts: StartOptions = {}): Promise<TestServer> {
  return startServer(engine, { ...opts, env: { BASALT_WEB_TRUSTED_PROXIES: '127.0.0.1', ...(opts.env ?? {}) } });
}

/** A sign-in from a chosen address, as a same-origin panel would send it. */
export function login(
  s: TestServer,
  email: string,
  password: string,
  from = ip(),
  headers: Record<string, string> = {},
): Promise<Reply> {
  return s.req('POST', '/api/admin/auth/login', {
    body: { email, password },
    headers: { 'sec-fetch-site': 'same-origin', 'x-forwarded-for': from, ...headers },
  });
}

export async function auditRows(s: TestServer, action: string): Promise<any[]> {
  return (await s.platform.db.query('SELECT * FROM basalt.admin_audit WHERE action = $1 ORDER BY id', [action])).rows;
}
