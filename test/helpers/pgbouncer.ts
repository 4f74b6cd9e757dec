/**
 * Debian's PgBouncer (`apt-get install pgbouncer`, which .ci/run does) in transaction mode in
 * front of the test PostgreSQL, configured as docs/operations.md "Scaling out" tells an
 * operator: SCRAM for clients, the platform role in `auth_file`, every other role (the
 * authenticator Basalt makes, `basalt_auth_<database>`) looked up with `auth_query` as that role.
 * Started on a free port for one suite; without the binary or BASALT_TEST_DATABASE_URL the
 * suites that need it are skipped.
 */
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_URL } from './engines';
import { freePort } from './binary';
import { eventually } from './wait';

export const PGBOUNCER_BIN = '/usr/sbin/pgbouncer';
export const HAS_PGBOUNCER = existsSync(PGBOUNCER_BIN) && ADMIN_URL !== '';

export interface PgBouncer {
  port: number;
  /** `databaseUrl` (a URL of the test server's) reached through the pooler, as the platform role. */
  through(databaseUrl: string): string;
  /** What PgBouncer logged (for a failing test's message). */
  log(): string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Server connections per database and role (default 8: the test server allows 100 for everyone). */
  poolSize?: number;
  /** A URL of the server, as its superuser (default BASALT_TEST_DATABASE_URL). */
  server?: string;
}

/** Start PgBouncer in transaction mode in front of BASALT_TEST_DATABASE_URL's server (or `opts.server`). */
export async function startPgBouncer(opts: PgBouncerOptions = {}): Promise<PgBouncer> {
  const server = new URL(opts.server ?? ADMIN_URL);
  const role = decodeURIComponent(server.username || 'postgres');
  const password = crypto.randomUUID();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'basalt-pgbouncer-'));
  // PgBouncer refuses to run as root: run as nobody then, who must read the files.
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, 'users.txt'), `"${role}" "${password}"\n`, { mode: 0o644 });
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'pool_mode = transaction',
      'auth_type = scram-sha-256',
      `auth_file = ${join(dir, 'users.txt')}`,
      `auth_user = ${role}`,
      'auth_query = SELECT usename, passwd FROM pg_catalog.pg_shadow WHERE usename = $1',
      `default_pool_size = ${opts.poolSize ?? 8}`,
      'max_client_conn = 500',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const asNobody = process.getuid?.() === 0 ? ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups'] : [];
  const proc = Bun.spawn([...asNobody, PGBOUNCER_BIN, join(dir, 'pgbouncer.ini')], {
    stdout: 'pipe',
    stderr: 'pipe',
  });
  let out = '';
  const collect = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s) out += new TextDecoder().decode(chunk);
  };
  void collect(proc.stdout);
  void collect(proc.stderr);
  const stop = async () => {
    proc.kill('SIGTERM');
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await eventually(
      () =>
        new Promise<boolean>((resolve) => {
          if (proc.exitCode !== null) throw new Error(`pgbouncer exited (${proc.exitCode}): ${out}`);
          const c = net.connect({ host: '127.0.0.1', port }, () => {
            c.destroy();
            resolve(true);
          });
          c.on('error', () => resolve(false));
        }),
      { what: 'pgbouncer to listen', timeout: 10_000 },
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    port,
    through(databaseUrl) {
      const u = new URL(databaseUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      u.username = encodeURIComponent(role);
      u.password = password;
      return u.toString();
    },
    log: () => out,
    stop,
  };
}
