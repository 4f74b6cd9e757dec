/**
 * `npm test` after the lint and the type-check: every suite, each test file in its own
 * `bun test` process, two (or BASALT_TEST_JOBS) at a time, the longest first.
 *
 * - On the source: every test file, except the HTTP-level suites of EXECUTABLE_SUITES that
 *   skip nothing on the executable (no `ON_SOURCE`, no `canSql`): those run there alone.
 * - Against the executable: the suites of EXECUTABLE_SUITES, with BASALT_TEST_EXECUTABLE set,
 *   so each suite's `startServer` starts the compiled `basalt` in its own process instead of
 *   the platform in this one (test/helpers/server.ts). A suite belongs there when it talks to
 *   the server only over HTTP (settings, keys and extension settings go through the
 *   executable's admin API: `s.settings`, `createKey`, `s.setExtensionSetting`; tables
 *   through `migrations`; SQL beside the server through `s.sql` where `canSql`); a check
 *   that reads `s.platform` is guarded by `ON_SOURCE`. A command-line suite runs the
 *   executable's own command line there (`runCli`, `basaltCommand` in test/helpers/cli.ts).
 *
 * The executable is built once (or taken from BASALT_TEST_BUILT, as CI does) and shared by
 * every process through BASALT_TEST_BUILT, as is one initialized embedded data dir
 * (BASALT_TEST_EMBEDDED_TEMPLATE, test/helpers/engines.ts). Test files can run side by side:
 * each test takes free ports and its own data dir or database.
 *
 *   bun scripts/test.ts                      everything (npm test)
 *   bun scripts/test.ts --executable         the executable half only (npm run test:executable)
 *   bun scripts/test.ts --source             the source half only
 *   bun scripts/test.ts test/a.test.ts ...   those files, on each target they belong to
 *   --record                                 write the measured times to scripts/test-times.json
 *
 * Each file's output is printed whole when it ends (bun's own "N pass" / "N fail" lines,
 * which .ci/run adds up), then one summary. scripts/test-times.json holds each file's
 * last measured time, only to start the long files first.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { openEmbedded } from '../src/db/embedded';

/** The HTTP-level suites run against the executable, on both engines. */
export const EXECUTABLE_SUITES = [
  'test/core/smoke.test.ts',
  'test/core/docs-page.test.ts',
  'test/openapi/conformance.test.ts',
  'test/database/openapi.test.ts',
  'test/database/migrations.test.ts',
  'test/extensions/openapi.test.ts',
  'test/panel/assets.test.ts',
  'test/panel/data-relations.test.ts',
  'test/logs/request-log.test.ts',
  'test/extensions/files.test.ts',
  'test/database/values.test.ts',
  'test/database/query.test.ts',
  'test/database/relations.test.ts',
  'test/database/answer-size.test.ts',
  'test/database/security.test.ts',
  'test/database/timezone.test.ts',
  'test/database/round-trips.test.ts',
  'test/database/user-data.test.ts',
  'test/database/transactions.test.ts',
  'test/database/waiting.test.ts',
  'test/database/failover.test.ts',
  'test/database/bind-limit.test.ts',
  'test/database/pooler.test.ts',
  'test/realtime/users.test.ts',
  'test/realtime/visibility.test.ts',
  'test/realtime/large-rows.test.ts',
  'test/realtime/service-keys.test.ts',
  'test/realtime/limits.test.ts',
  'test/realtime/instances.test.ts',
  'test/realtime/browser-reconnect.test.ts',
  'test/client/client.test.ts',
  'test/client/types.test.ts',
  'test/client/notes-browser.test.ts',
  'test/auth/sign-in-browser.test.ts',
  'test/auth/codes.test.ts',
  'test/auth/limits.test.ts',
  'test/auth/oauth.test.ts',
  'test/auth/ownership.test.ts',
  'test/auth/accounts.test.ts',
  'test/auth/openapi.test.ts',
  'test/auth/tokens.test.ts',
  'test/auth/hardening.test.ts',
  'test/auth/mail.test.ts',
  'test/security/auth-input.test.ts',
  'test/security/email-lookalikes.test.ts',
  'test/security/bounds.test.ts',
  'test/security/cors.test.ts',
  'test/security/injection.test.ts',
  'test/security/jwt.test.ts',
  'test/security/routing.test.ts',
  'test/security/smuggling.test.ts',
  'test/security/headers.test.ts',
  'test/security/info-items.test.ts',
  'test/security/csv-formulas.test.ts',
  'test/security/admin-idle.test.ts',
  'test/security/admin-lockout.test.ts',
  'test/security/auth-edges.test.ts',
  'test/security/settings-safety.test.ts',
  'test/security/revoke-rollback.test.ts',
  'test/security/policy-escape.test.ts',
  'test/admin/csrf.test.ts',
  'test/admin/users.test.ts',
  'test/admin/endpoints.test.ts',
  'test/admin/data-routes.test.ts',
  'test/admin/data-access.test.ts',
  'test/admin/data-schema.test.ts',
  'test/admin/audit.test.ts',
  'test/keys/access-mode.test.ts',
  'test/keys/cli.test.ts',
  'test/admin/cli.test.ts',
  'test/mail/cli.test.ts',
  'test/mail/send.test.ts',
  'test/mail/idempotency.test.ts',
  'test/admin/user-sign-in.test.ts',
  'test/admin/instances.test.ts',
  'test/mail/crash.test.ts',
  'test/admin/auth.test.ts',
  'test/mail/two-instances.test.ts',
  'test/mail/delivery.test.ts',
  'test/extensions/jobs.test.ts',
  'test/backup/pitr.test.ts',
];

type Target = 'source' | 'executable';
interface Job {
  file: string;
  target: Target;
}
interface Result extends Job {
  code: number;
  output: string;
  seconds: number;
  /** CPU time of the bun test process itself (not of the servers or browsers it starts). */
  cpu: number;
}

const ROOT = resolve(import.meta.dir, '..');
const TIMES = join(ROOT, 'scripts/test-times.json');
const JOBS = Number(process.env.BASALT_TEST_JOBS) || Math.max(2, availableParallelism());
// Real servers, databases and child processes on a busy machine: generous per-test bounds, and
// a whole file that has not ended after 20 minutes is killed (a hang fails the run, not stalls it).
const TEST_TIMEOUT_MS = 120_000;
const FILE_TIMEOUT_MS = 20 * 60_000;
/** Assumed for a file scripts/test-times.json does not know yet (it then starts early). */
const UNKNOWN_SECONDS = 60;

const key = (j: Job) => `${j.target} ${j.file}`;
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
/** A suite with checks the executable skips (`ON_SOURCE`, `canSql`: test/helpers/server.ts) also runs on the source. */
const hasSourceChecks = (file: string) => /\b(ON_SOURCE|canSql)\b/.test(read(file));

function jobs(args: string[]): Job[] {
  const files = args.filter((a) => !a.startsWith('--'));
  const only = args.includes('--executable') ? 'executable' : args.includes('--source') ? 'source' : undefined;
  const all = [...new Bun.Glob('test/**/*.test.ts').scanSync({ cwd: ROOT })].sort();
  const unknown = [...files, ...EXECUTABLE_SUITES].filter((f) => !all.includes(relative(ROOT, resolve(f))));
  if (unknown.length) throw new Error(`no such test file: ${unknown.join(', ')}`);
  const chosen = files.length ? files.map((f) => relative(ROOT, resolve(f))) : all;
  const list: Job[] = [];
  for (const file of chosen) {
    const onExecutable = EXECUTABLE_SUITES.includes(file);
    if (only !== 'executable' && (!onExecutable || hasSourceChecks(file))) list.push({ file, target: 'source' });
    if (only !== 'source' && onExecutable) list.push({ file, target: 'executable' });
  }
  return list;
}

async function build(): Promise<string> {
  const given = process.env.BASALT_TEST_BUILT;
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

async function run(job: Job, env: Record<string, string>): Promise<Result> {
  const started = performance.now();
  const proc = Bun.spawn([process.execPath, 'test', '--timeout', String(TEST_TIMEOUT_MS), `./${job.file}`], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      ...(job.target === 'executable' ? { BASALT_TEST_EXECUTABLE: env.BASALT_TEST_BUILT } : {}),
    },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  let killed = false;
  const watchdog = setTimeout(() => {
    killed = true;
    proc.kill('SIGKILL');
  }, FILE_TIMEOUT_MS);
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(watchdog);
  const note = killed ? `\n${job.file} did not end within ${FILE_TIMEOUT_MS / 60_000} minutes: killed\n 1 fail\n` : '';
  const usage = proc.resourceUsage();
  const cpu = usage ? Number(usage.cpuTime.user + usage.cpuTime.system) / 1e6 : 0;
  return {
    ...job,
    code: killed ? 1 : code,
    output: out + err + note,
    seconds: (performance.now() - started) / 1000,
    cpu,
  };
}

/**
 * Each failed test of a file's output with the lines bun printed before it (its error and
 * stack), so the summary at the end of a long log says what failed, not only where.
 */
export function failures(output: string, before = 25, most = 150): string {
  const lines = output.split('\n');
  const shown = new Set<number>();
  lines.forEach((l, i) => {
    if (!l.startsWith('(fail)')) return;
    for (let j = Math.max(0, i - before); j <= i; j++) shown.add(j);
  });
  const picked = [...shown].sort((a, b) => a - b);
  const out: string[] = [];
  picked.forEach((i, k) => {
    if (k > 0 && picked[k - 1] !== i - 1) out.push('  ...');
    out.push(`  | ${lines[i]}`);
  });
  if (out.length > most) return [...out.slice(0, most), `  ... (${out.length - most} more lines above)`].join('\n');
  return out.join('\n') || '  | (no failed test named: the process itself failed; its output is above)';
}

const count = (output: string, what: string) => Number(new RegExp(`^ *(\\d+) ${what}$`, 'm').exec(output)?.[1] ?? 0);

if (import.meta.main) {
  const args = process.argv.slice(2);
  const started = performance.now();
  const queue = jobs(args);
  let times: Record<string, number> = {};
  try {
    times = JSON.parse(readFileSync(TIMES, 'utf8'));
  } catch {}
  // A suite new to one target takes about what it takes on the other.
  const other = (j: Job): Job => ({ ...j, target: j.target === 'source' ? 'executable' : 'source' });
  const estimate = (j: Job) => times[key(j)] ?? times[key(other(j))] ?? UNKNOWN_SECONDS;
  queue.sort((a, b) => estimate(b) - estimate(a));

  const exe = await build();
  const template = await embeddedTemplate();
  const env = { BASALT_TEST_BUILT: exe, BASALT_TEST_EMBEDDED_TEMPLATE: template };
  console.log(`${queue.length} test files, ${JOBS} at a time; the executable: ${exe}`);

  const results: Result[] = [];
  const worker = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      const r = await run(job, env);
      results.push(r);
      console.log(`\n== ${r.target}: ${r.file} (${r.seconds.toFixed(1)} s, ${r.cpu.toFixed(1)} s CPU)\n${r.output.trimEnd()}`);
    }
  };
  await Promise.all(Array.from({ length: JOBS }, worker)).finally(() =>
    rmSync(template, { recursive: true, force: true }),
  );

  const measured = Object.fromEntries(
    results.map((r) => [key(r), Math.round(r.seconds * 10) / 10] as const).sort(([a], [b]) => a.localeCompare(b)),
  );
  if (args.includes('--record')) writeFileSync(TIMES, JSON.stringify({ ...times, ...measured }, null, 2) + '\n');
  const failed = results.filter((r) => r.code !== 0);
  const line = (target: Target) => {
    const rs = results.filter((r) => r.target === target);
    const sum = (what: string) => rs.reduce((n, r) => n + count(r.output, what), 0);
    const busy = rs.reduce((n, r) => n + r.seconds, 0);
    const cpu = rs.reduce((n, r) => n + r.cpu, 0);
    return `on the ${target}: ${rs.length} files, ${sum('pass')} pass, ${sum('fail')} fail, ${sum('skip')} skip (${Math.round(busy)} s in its processes, ${Math.round(cpu)} s CPU)`;
  };
  // Not as bare "N pass" lines: .ci/run adds up those of every bun test process above.
  console.log(`\n== summary\n${line('source')}\n${line('executable')}`);
  for (const r of failed) console.log(`failed: ${r.target}: ${r.file} (exit ${r.code})\n${failures(r.output)}`);
  console.log(`${Math.round((performance.now() - started) / 1000)} s in all, ${JOBS} files at a time`);
  process.exit(failed.length ? 1 : 0);
}
