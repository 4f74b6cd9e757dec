/**
 * `npm run test:executable` (the second half of `npm test`): the HTTP-level suites against
 * the compiled executable, as users run it. Builds `basalt` once (or takes the one
 * BASALT_TEST_BUILT names, as CI does), then runs the suites below with BASALT_TEST_EXECUTABLE set, so each
 * suite's `startServer` starts that executable instead of the platform in this process
 * (test/helpers/server.ts). Every suite runs on each engine of test/helpers/engines.ts.
 *
 * The suites run in two `bun test` processes at once over disjoint halves of the list:
 * each test has its own free ports and its own data dir or database, so they share
 * nothing. A suite belongs here when it talks to the server only over HTTP (settings,
 * keys and extension settings go through the executable's admin API: `s.settings`,
 * `createKey`, `s.setExtensionSetting`, tables through `migrations`); one that reads
 * `s.platform` stays on the source run only, and says so with a clear error if listed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { openEmbedded } from '../src/db/embedded';

export const EXECUTABLE_SUITES = [
  'test/openapi/conformance.test.ts',
  'test/extensions/files.test.ts',
  'test/database/values.test.ts',
  'test/security/auth-input.test.ts',
  'test/security/bounds.test.ts',
  'test/security/cors.test.ts',
  'test/security/injection.test.ts',
  'test/security/routing.test.ts',
  'test/security/smuggling.test.ts',
];

const ROOT = resolve(import.meta.dir, '..');
const SHARDS = 2;

async function build(): Promise<string> {
  const given = process.env.BASALT_TEST_BUILT ?? process.env.BASALT_TEST_EXECUTABLE;
  if (given) return resolve(given);
  const out = join(mkdtempSync(join(tmpdir(), 'basalt-test-exe-')), 'basalt');
  const proc = Bun.spawn([process.execPath, join(ROOT, 'build.ts'), '--outfile', out], {
    cwd: ROOT,
    stdout: 'inherit',
    stderr: 'inherit',
  });
  if ((await proc.exited) !== 0) throw new Error('build.ts failed');
  return out;
}

/** An initialized embedded data dir for every process (test/helpers/engines.ts), so initdb runs once. */
async function embeddedTemplate(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'basalt-template-'));
  const db = await openEmbedded(join(dir, 'pg'));
  await db.close();
  return dir;
}

// The executable starts in its own process (the embedded engine's WebAssembly compiled there each
// time), so on a busy machine a suite's beforeAll needs more than the source run's 60 s.
async function shard(files: string[], env: Record<string, string>): Promise<{ code: number; output: string }> {
  const proc = Bun.spawn([process.execPath, 'test', '--timeout', '120000', ...files], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, output: out + err };
}

if (import.meta.main) {
  const started = performance.now();
  const exe = await build();
  const template = await embeddedTemplate();
  console.log(`suites against the executable ${exe}`);
  const env = { BASALT_TEST_EXECUTABLE: exe, BASALT_TEST_EMBEDDED_TEMPLATE: template };
  const shards = Array.from({ length: SHARDS }, (_, i) => EXECUTABLE_SUITES.filter((_, j) => j % SHARDS === i));
  const results = await Promise.all(shards.map((files) => shard(files, env))).finally(() =>
    rmSync(template, { recursive: true, force: true }),
  );
  const count = (what: string) =>
    results.reduce((n, r) => n + Number(new RegExp(`^ *(\\d+) ${what}$`, 'm').exec(r.output)?.[1] ?? 0), 0);
  for (const [i, r] of results.entries()) console.log(`\n== executable, part ${i + 1} of ${SHARDS}\n${r.output}`);
  // Not as bare "N pass" lines: .ci/run adds up those of every bun test run it saw.
  console.log(
    `\nagainst the executable: ${count('pass')} pass, ${count('fail')} fail, ${count('skip')} skip (${Math.round((performance.now() - started) / 1000)} s)`,
  );
  process.exit(results.some((r) => r.code !== 0) ? 1 : 0);
}
