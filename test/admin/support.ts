/**
 * Shared pieces of the admin suites: a server that believes X-Forwarded-For /
 * X-Forwarded-Proto from 127.0.0.1 (so each test picks its client address), fresh
 * addresses, a sign-in request and the audit rows (on either target).
 */
import { startServer, type Reply, type StartOptions, type TestServer } from '../helpers/server';
import type { Engine } from '../helpers/engines';
import { adminReq, type AdminAuth } from '../helpers/admin';

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

/**
 * The audit entries of one action, oldest first: the rows themselves on the source; on the
 * executable the admin API's entries (the same fields), read as `a` or as the control administrator.
 */
export async function auditRows(s: TestServer, action: string, a?: AdminAuth): Promise<any[]> {
  if (s.target === 'source')
    return (await s.platform.db.query('SELECT * FROM basalt.admin_audit WHERE action = $1 ORDER BY id', [action])).rows;
  const entries: any[] = [];
  let cursor: string | null = null;
  do {
    const path: string = `/api/admin/audit?action=${encodeURIComponent(action)}&limit=500${cursor ? `&before=${cursor}` : ''}`;
    const r: Reply = a ? await adminReq(s, a, 'GET', path) : await s.admin('GET', path);
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${r.text}`);
    entries.push(...r.body.data.entries);
    cursor = r.body.data.next_cursor;
  } while (cursor);
  return entries.reverse();
}
