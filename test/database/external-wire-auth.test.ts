/**
 * How src/db/external-wire.ts (a user's batch on external PostgreSQL, one Sync) authenticates
 * and speaks TLS, against a scratch PostgreSQL cluster of this file's own (the suite's server
 * trusts everyone and has no TLS): `password` (cleartext), `md5` and `scram-sha-256` lines in
 * its pg_hba.conf, each with and without TLS; a role only `hostssl` admits; a wrong password,
 * a non-TLS connection to that role and an unverifiable certificate refused as "database
 * unavailable"; a SCRAM server whose nonce or signature does not check out refused; the
 * connections recycled after the pool's max_lifetime.
 *
 * The cluster: initdb and postgres from /usr/lib/postgresql/<version>/bin (run as the
 * `postgres` OS user when the tests run as root: initdb refuses root), a self-signed
 * certificate made with openssl, a free port on 127.0.0.1, its socket in the temp dir.
 * Skipped (with a note) where no initdb is installed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { DatabaseUnavailableError, driverCall, type QueryResult } from '../../src/db/engine';
import { openExternal } from '../../src/db/external';
import { type ResolvedOptions, WirePool, type WireStatement } from '../../src/db/external-wire';
import { undeclared } from '../../src/util/undeclared';
import { scramVerifier } from '../../src/db/wire/auth';
import { eventually } from '../helpers/wait';

const BIN = (() => {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : null;
})();
if (!BIN) console.warn('external-wire-auth: no /usr/lib/postgresql/*/bin/initdb here; skipped');

const AS_ROOT = process.getuid?.() === 0;
/** A command as the cluster's owner: the `postgres` OS user when running as root. */
const asOwner = (cmd: string[]) => (AS_ROOT ? ['runuser', '-u', 'postgres', '--', ...cmd] : cmd);

const PASSWORD: Record<string, string> = {
  scram_user: 'scram-secret-1',
  md5_user: 'md5-secret-2',
  plain_user: 'plain-secret-3',
  tls_user: 'tls-secret-4',
};
const WRONG = 'not-the-password-9';
const VERIFIED = 'verifier-secret-5';
const WHO = { sql: 'SELECT current_user AS who, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()', params: [] };

function run(cmd: string[]): void {
  const r = spawnSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd.join(' ')} failed (${r.status}): ${r.stderr || r.stdout}`);
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe.skipIf(!BIN)('external batches: authentication and TLS (src/db/external-wire.ts)', () => {
  let dir: string;
  let port: number;
  let server: ReturnType<typeof Bun.spawn> | undefined;
  let pid = 0;
  const pools: WirePool[] = [];
  const drivers: postgres.Sql[] = [];

  const url = (user: string, password: string, sslmode?: string) =>
    `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres${sslmode ? `?sslmode=${sslmode}` : ''}`;

  /** A WirePool with the options postgres.js resolves for `u` (as src/db/external.ts opens it), no connection made by the driver. */
  function pool(u: string, extra: Partial<ResolvedOptions> = {}): WirePool {
    const sql = postgres(u, { max: 1, onnotice: () => {}, connection: { application_name: 'basalt-wire-auth' } });
    drivers.push(sql);
    const p = new WirePool(
      { ...undeclared<ResolvedOptions>(sql.options), ...extra },
      {
        connectTimeoutMs: 5000,
        idleTimeoutMs: 60_000,
      },
    );
    pools.push(p);
    return p;
  }
  /** A batch as Db.atOnce runs it on the wire path: its errors normalized. */
  const batch = (p: WirePool, sts: WireStatement[] = [WHO]): Promise<QueryResult[]> => driverCall(() => p.batch(sts));
  const refused = async (p: WirePool): Promise<DatabaseUnavailableError> => {
    const e = await batch(p).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(DatabaseUnavailableError);
    return e as DatabaseUnavailableError;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'basalt-wire-auth-'));
    const data = join(dir, 'data');
    const sock = join(dir, 'sock');
    mkdirSync(sock);
    run([
      'openssl',
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-keyout',
      join(dir, 'server.key'),
      '-out',
      join(dir, 'server.crt'),
    ]);
    if (AS_ROOT) run(['chown', '-R', 'postgres:postgres', dir]);
    run(['chmod', '600', join(dir, 'server.key')]);
    run(asOwner([join(BIN!, 'initdb'), '-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']));
    writeFileSync(
      join(data, 'pg_hba.conf'),
      [
        'local all postgres trust',
        'host all scram_user 127.0.0.1/32 scram-sha-256',
        'host all md5_user 127.0.0.1/32 md5',
        'host all verifier_user 127.0.0.1/32 md5',
        'host all plain_user 127.0.0.1/32 password',
        'hostssl all tls_user 127.0.0.1/32 scram-sha-256',
        'hostnossl all tls_user 127.0.0.1/32 reject',
        '',
      ].join('\n'),
    );
    if (AS_ROOT) run(['chown', 'postgres:postgres', join(data, 'pg_hba.conf')]);
    port = await freePort();
    server = Bun.spawn(
      asOwner([
        join(BIN!, 'postgres'),
        '-D',
        data,
        '-p',
        String(port),
        '-k',
        sock,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'ssl=on',
        '-c',
        `ssl_cert_file=${join(dir, 'server.crt')}`,
        '-c',
        `ssl_key_file=${join(dir, 'server.key')}`,
        '-c',
        'fsync=off',
        '-c',
        'max_connections=30',
        '-c',
        'shared_buffers=16MB',
      ]),
      { stdout: 'ignore', stderr: Bun.file(join(dir, 'server.log')) },
    );
    const admin = postgres({ host: sock, port, user: 'postgres', database: 'postgres', max: 1, onnotice: () => {} });
    try {
      await eventually(() => admin`SELECT 1`.then(() => true), { timeout: 30_000, what: 'the scratch cluster' });
      pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n', 1)[0]);
      for (const [user, password] of Object.entries(PASSWORD)) {
        await admin.unsafe(`SET password_encryption = '${user === 'md5_user' ? 'md5' : 'scram-sha-256'}'`);
        await admin.unsafe(`CREATE ROLE ${user} LOGIN PASSWORD '${password}'`);
      }
      // Given as a SCRAM verifier, as Basalt gives its authenticator's (never the password itself).
      await admin.unsafe(`CREATE ROLE verifier_user LOGIN PASSWORD '${scramVerifier(VERIFIED)}'`);
      const stored = await admin<{ rolname: string; kind: string }[]>`
        SELECT rolname, left(rolpassword, 3) AS kind FROM pg_authid WHERE rolname IN ('md5_user', 'scram_user')`;
      expect(Object.fromEntries(stored.map((r) => [r.rolname, r.kind]))).toEqual({
        md5_user: 'md5',
        scram_user: 'SCR',
      });
    } finally {
      await admin.end();
    }
  }, 60_000);

  afterAll(async () => {
    for (const p of pools) p.close();
    await Promise.all(drivers.map((d) => d.end({ timeout: 1 })));
    // Fast shutdown, by the postmaster's own pid (under runuser when root); runuser itself if it never got there.
    const pidFile = join(dir, 'data', 'postmaster.pid');
    if (!pid && existsSync(pidFile)) pid = Number(readFileSync(pidFile, 'utf8').split('\n', 1)[0]);
    if (pid) process.kill(pid, 'SIGINT');
    else server?.kill();
    await Promise.race([server?.exited, Bun.sleep(10_000)]);
    rmSync(dir, { recursive: true, force: true });
  });

  const METHODS = [
    ['scram-sha-256', 'scram_user'],
    ['md5', 'md5_user'],
    ['password (cleartext)', 'plain_user'],
  ] as const;

  for (const [method, user] of METHODS) {
    test(`${method}: the batch connects and runs, without TLS and with sslmode=require`, async () => {
      const [plain] = await batch(pool(url(user, PASSWORD[user]!)));
      expect(plain!.rows).toEqual([{ who: user, ssl: false }]);
      const [secured] = await batch(pool(url(user, PASSWORD[user]!, 'require')));
      expect(secured!.rows).toEqual([{ who: user, ssl: true }]);
    });

    test(`${method}: a wrong password is "database unavailable", the password in no message`, async () => {
      const e = await refused(pool(url(user, WRONG)));
      expect(e.message).toBe('database unavailable (08004)');
      const cause = String((e.cause as Error).message);
      expect(cause).toContain('28P01');
      for (const text of [e.message, cause, JSON.stringify(e.cause)]) {
        expect(text).not.toContain(WRONG);
        expect(text).not.toContain(PASSWORD[user]!);
      }
    });
  }

  test("a role whose password was set as Basalt's SCRAM verifier signs in with the password (an md5 line then speaks SCRAM)", async () => {
    const [r] = await batch(pool(url('verifier_user', VERIFIED)));
    expect(r!.rows).toEqual([{ who: 'verifier_user', ssl: false }]);
    const db = await openExternal(url('verifier_user', VERIFIED), { max: 1 });
    try {
      expect((await db.query<{ who: string }>('SELECT current_user AS who')).rows).toEqual([{ who: 'verifier_user' }]);
    } finally {
      await db.close();
    }
    expect((await refused(pool(url('verifier_user', WRONG)))).message).toBe('database unavailable (08004)');
  });

  test('a hostssl-only role: sslmode=require and prefer connect encrypted, disable is refused', async () => {
    const pw = PASSWORD.tls_user!;
    for (const mode of ['require', 'prefer']) {
      const [r] = await batch(pool(url('tls_user', pw, mode)));
      expect(r!.rows).toEqual([{ who: 'tls_user', ssl: true }]);
    }
    const e = await refused(pool(url('tls_user', pw, 'disable')));
    expect(e.message).toBe('database unavailable (08004)');
    expect(String((e.cause as Error).message)).toContain('no encryption');
  });

  test('sslmode=verify-full against a self-signed certificate is refused', async () => {
    const e = await refused(pool(url('tls_user', PASSWORD.tls_user!, 'verify-full')));
    expect(e.message).toBe('database unavailable (08001)');
  });

  test('through the Db (openExternal): a user request on a SCRAM, TLS-only role runs encrypted on the wire path', async () => {
    const db = await openExternal(url('tls_user', PASSWORD.tls_user!, 'require'), {
      max: 2,
      connection: { application_name: 'basalt-wire-db' },
    });
    try {
      const [r] = await db.atOnce([WHO]);
      expect(r!.rows).toEqual([{ who: 'tls_user', ssl: true }]);
      // The driver's connection and the batches' own: the batch did not fall back to the driver.
      const n = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'basalt-wire-db'",
      );
      expect(n.rows[0]!.n).toBe(2);
    } finally {
      await db.close();
    }
  });

  test('a connection is closed when released past its max_lifetime, kept before', async () => {
    const backend = async (p: WirePool) =>
      (await batch(p, [{ sql: 'SELECT pg_backend_pid() AS pid', params: [] }]))[0]!.rows[0]!.pid;
    const short = pool(url('scram_user', PASSWORD.scram_user!), { max_lifetime: 0.3 });
    const first = await backend(short);
    expect(await backend(short)).toBe(first);
    await Bun.sleep(350);
    const after = await backend(short); // released past its lifetime by this batch: closed
    expect(after).toBe(first);
    expect(await backend(short)).not.toBe(first);
    // postgres.js's default, a random 30 to 60 minutes for each connection, is what the pool is given.
    const sql = postgres(url('scram_user', 'x'), { max: 1 });
    drivers.push(sql);
    const lifetime = undeclared<ResolvedOptions>(sql.options).max_lifetime;
    expect(typeof lifetime).toBe('function');
    const seconds = (lifetime as () => number)();
    expect(seconds).toBeGreaterThanOrEqual(1800);
    expect(seconds).toBeLessThanOrEqual(3600);
  });

  /** A server that speaks SCRAM wrongly: its nonce does not extend the client's, or its signature is not the right one. */
  async function fakeScram(wrong: 'nonce' | 'signature'): Promise<{ port: number; close: () => void }> {
    const msg = (type: number, body: Buffer) => {
      const head = Buffer.alloc(9);
      head[0] = 0x52; // Authentication
      head.writeInt32BE(8 + body.length, 1);
      head.writeInt32BE(type, 5);
      return Buffer.concat([head, body]);
    };
    const s = net.createServer((c) => {
      let step = 0;
      c.on('data', (chunk: Buffer) => {
        step++;
        if (step === 1) c.write(msg(10, Buffer.from('SCRAM-SHA-256\0\0')));
        else if (step === 2) {
          const clientNonce = /r=([^,\0]+)/.exec(chunk.toString('latin1'))![1]!;
          const r = wrong === 'nonce' ? `other${clientNonce}` : `${clientNonce}server`;
          c.write(msg(11, Buffer.from(`r=${r},s=${Buffer.from('salt').toString('base64')},i=4096`)));
        } else c.write(msg(12, Buffer.from(`v=${Buffer.alloc(32, 7).toString('base64')}`)));
      });
      c.on('error', () => {});
    });
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    return { port: (s.address() as net.AddressInfo).port, close: () => s.close() };
  }

  for (const wrong of ['nonce', 'signature'] as const) {
    test(`SCRAM: a server whose ${wrong} does not check out is refused`, async () => {
      const fake = await fakeScram(wrong);
      try {
        const e = await refused(pool(`postgres://u:pw@127.0.0.1:${fake.port}/db`));
        expect(e.message).toBe('database unavailable (08001)');
        expect(String((e.cause as Error).message)).toContain(
          wrong === 'nonce' ? 'SASL_NONCE_MISMATCH' : 'SASL_SIGNATURE_MISMATCH',
        );
      } finally {
        fake.close();
      }
    });
  }
});
