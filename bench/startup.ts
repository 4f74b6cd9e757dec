/**
 * Start-up of the compiled executable: time from spawn to the first successful
 * response, and idle RSS, for the embedded engine on an empty data dir (first run:
 * initdb), the embedded engine warm, and external PostgreSQL; RSS 3 s after the first response. Baseline in the same
 * run: a minimal compiled Bun.serve executable. Median of several runs.
 *
 *   bun bench/startup.ts [--runs 5] [--database-url postgres://...]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { freePort, median, rssMiB } from './support';

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: { runs: { type: 'string' }, 'database-url': { type: 'string' } },
});
const RUNS = Number(values.runs ?? 5);
const ADMIN =
  values['database-url'] ?? process.env.BASALT_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROOT = resolve(import.meta.dir, '..');
const work = mkdtempSync(join(tmpdir(), 'basalt-bench-startup-'));

async function run(cmd: string[], cwd = ROOT) {
  const p = Bun.spawn(cmd, { cwd, stdout: 'pipe', stderr: 'pipe' });
  if ((await p.exited) !== 0) throw new Error(`${cmd.join(' ')} failed: ${await new Response(p.stderr).text()}`);
}

// Build both executables.
const basalt = join(work, 'basalt');
await run([process.execPath, 'build.ts', '--outfile', basalt]);
const minimalSrc = join(work, 'minimal.ts');
writeFileSync(
  minimalSrc,
  `Bun.serve({ port: Number(process.env.PORT), hostname: '127.0.0.1', fetch: () => Response.json({ ok: true }) });`,
);
const minimal = join(work, 'minimal');
await run([process.execPath, 'build', '--compile', minimalSrc, '--outfile', minimal]);

/** Spawn, poll until 200, wait 3 s idle, read RSS, stop. */
async function once(
  exe: string,
  cwd: string,
  env: Record<string, string>,
  path: string,
): Promise<{ ms: number; rss: number }> {
  const port = await freePort();
  const t0 = performance.now();
  const proc = Bun.spawn([exe, 'serve'], {
    cwd,
    env: {
      PATH: '/usr/bin:/bin',
      HOME: cwd,
      PORT: String(port),
      BASALT_WEB_PORT: String(port),
      BASALT_LOG_LEVEL: 'warn',
      ...env,
    },
    stdout: 'ignore',
    stderr: 'pipe',
  });
  let ms = NaN;
  while (performance.now() - t0 < 60_000) {
    const ok = await fetch(`http://127.0.0.1:${port}${path}`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) {
      ms = performance.now() - t0;
      break;
    }
    if (proc.exitCode !== null) throw new Error(`exited: ${await new Response(proc.stderr).text()}`);
    await Bun.sleep(5);
  }
  await Bun.sleep(3000); // idle: after start-up's one-off work has settled
  const rss = rssMiB(proc.pid);
  proc.kill('SIGTERM');
  await proc.exited;
  return { ms, rss };
}

interface Row {
  name: string;
  ms: number;
  rss: number;
}
const rows: Row[] = [];
async function scenario(name: string, fn: (i: number) => Promise<{ ms: number; rss: number }>) {
  const r: { ms: number; rss: number }[] = [];
  for (let i = 0; i < RUNS; i++) r.push(await fn(i));
  rows.push({ name, ms: median(r.map((x) => x.ms)), rss: median(r.map((x) => x.rss)) });
  console.error(`  ${name}: ${r.map((x) => x.ms.toFixed(0)).join(', ')} ms`);
}

await scenario('minimal Bun.serve executable (baseline)', async () => once(minimal, work, {}, '/'));
await scenario('basalt, embedded, first run (empty data dir)', async (i) => {
  const dir = mkdtempSync(join(work, `first-${i}-`));
  try {
    return await once(basalt, dir, {}, '/readyz');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
const warmDir = mkdtempSync(join(work, 'warm-'));
await once(basalt, warmDir, {}, '/readyz'); // initialize once
await scenario('basalt, embedded, warm', async () => once(basalt, warmDir, {}, '/readyz'));

let external = true;
const dbName = `basalt_bench_${Date.now()}`;
try {
  const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${dbName}`);
  await admin.end();
} catch (e) {
  external = false;
  console.error(`  external PostgreSQL skipped: ${(e as Error).message}`);
}
if (external) {
  const u = new URL(ADMIN);
  u.pathname = '/' + dbName;
  const extDir = mkdtempSync(join(work, 'ext-'));
  await once(basalt, extDir, { BASALT_DATABASE_URL: u.toString() }, '/readyz'); // migrate once
  await scenario('basalt, external PostgreSQL (migrated)', async () =>
    once(basalt, extDir, { BASALT_DATABASE_URL: u.toString() }, '/readyz'),
  );
  const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
}

const base = rows[0]!;
console.log(
  `\nStart-up to first successful response (median of ${RUNS}; basalt answers /readyz, i.e. database ready)\n`,
);
console.log('| scenario | first response (ms) | × baseline | idle RSS (MiB) |');
console.log('|---|---:|---:|---:|');
for (const r of rows)
  console.log(`| ${r.name} | ${r.ms.toFixed(0)} | ${(r.ms / base.ms).toFixed(1)} | ${r.rss.toFixed(0)} |`);
rmSync(work, { recursive: true, force: true });
