/**
 * Sign in to the admin API of a test server (docs/admin-api.md) and call it as the
 * panel does: session cookie, `X-CSRF-Token`, `Sec-Fetch-Site: same-origin`.
 *
 * @example
 * const a = await signInAdmin(s);
 * const r = await adminReq(s, a, 'POST', '/api/admin/keys', { type: 'public' });
 * expect(r.status).toBe(201);
 * // or by hand: fetch(s.url + '/api/admin/keys', { headers: a.headers() })
 */
import { resetBuckets } from '../../src/modules/auth/rate-limit';
import { CLI_ACTOR } from '../../src/modules/admin/audit';
import type { Reply, TestServer } from './server';
import { EXECUTABLE } from './executable-server';
import { runBinary } from './binary';

export const ADMIN_PASSWORD = 'admin password 1234';
let n = 0;

export interface AdminAuth {
  email: string;
  password: string;
  admin: { id: string; email: string };
  /** `basalt_admin=<token>` (a Cookie header value). */
  cookie: string;
  /** The raw session token in the cookie. */
  token: string;
  csrf: string;
  /** Cookie, X-CSRF-Token and Sec-Fetch-Site headers for a same-origin panel request. */
  headers(): Record<string, string>;
}

/**
 * Create an administrator as the command line does (`basalt admin create`, audited as the CLI):
 * in process, or with the executable's own command line (through its management socket on the
 * embedded engine).
 */
export async function createAdmin(s: TestServer, email: string, password = ADMIN_PASSWORD): Promise<void> {
  if (s.target === 'source') {
    await s.platform.services.admin.create(email, password, CLI_ACTOR);
    return;
  }
  const r = await executableCli(s, ['admin', 'create', '--email', email, '--password', password]);
  if (r.code !== 0) throw new Error(`basalt admin create failed (${r.code}): ${r.stderr}`);
}

/**
 * The executable's own command line beside its running server (executable only): on the
 * embedded engine the command runs inside `basalt serve` through the management socket,
 * on external PostgreSQL it opens the test's database itself, with the settings in `env`
 * (the server's own, e.g. BASALT_MIGRATIONS_DIR, are not passed on).
 */
export function executableCli(
  s: TestServer,
  args: string[],
  env: Record<string, string> = {},
): ReturnType<typeof runBinary> {
  if (s.target !== 'executable') throw new Error("executableCli runs the executable's command line");
  return runBinary(EXECUTABLE, args, s.db.dataDir, { ...s.db.env, BASALT_LOG_LEVEL: 'warn', ...env });
}

/**
 * Create an administrator (unless `email` names an existing one and `create: false`)
 * and sign in through POST /api/admin/auth/login. The sign-in rate limits of the test
 * client's address and of the account are reset first, so suites may sign in as often as they like
 * (on the source; the executable's suites start their own server and stay under the limits).
 */
export async function signInAdmin(
  s: TestServer,
  opts: { email?: string; password?: string; create?: boolean } = {},
): Promise<AdminAuth> {
  const email = opts.email ?? `admin-${Date.now().toString(36)}-${++n}@example.com`;
  const password = opts.password ?? ADMIN_PASSWORD;
  if (opts.create !== false) await createAdmin(s, email, password);
  if (s.target === 'source') {
    await resetBuckets(s.platform.db, 'admin_login_ip:127.0.0.1');
    await resetBuckets(s.platform.db, `admin_login_account:${JSON.stringify([email.toLowerCase(), '127.0.0.1'])}`);
  }
  const r = await s.req('POST', '/api/admin/auth/login', {
    body: { email, password },
    headers: { 'sec-fetch-site': 'same-origin' },
  });
  if (r.status !== 200) throw new Error(`admin sign-in failed: ${r.status} ${r.text}`);
  const set = r.headers.get('set-cookie') ?? '';
  const m = /^(?:__Host-)?basalt_admin=([^;]+)/.exec(set);
  if (!m) throw new Error(`admin sign-in set no session cookie: ${set}`);
  const cookie = set.split(';')[0]!;
  const csrf = r.body.data.csrf_token as string;
  return {
    email,
    password,
    admin: r.body.data.admin,
    cookie,
    token: m[1]!,
    csrf,
    headers: () => ({ cookie, 'x-csrf-token': csrf, 'sec-fetch-site': 'same-origin' }),
  };
}

/** A request to the admin API as the signed-in panel; `headers` are added last (to override). */
export function adminReq<T = any>(
  s: TestServer,
  a: AdminAuth | undefined,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply<T>> {
  return s.req<T>(method, path, {
    body,
    headers: { ...(a ? a.headers() : { 'sec-fetch-site': 'same-origin' }), ...headers },
  });
}
