/**
 * Where the time goes: Basalt from this checkout under Bun's CPU profiler while wrk (a
 * separate process) drives one bench:http workload at it; writes the profile as markdown
 * (hot functions, call tree, time per file) for reading before changing code
 * (docs/operations.md, Where the time goes).
 *
 *   npm run bench:profile                                  # select, external PostgreSQL
 *   BENCH_WORKLOAD=me BENCH_ENGINE=embedded BENCH_SECONDS=10 npm run bench:profile
 *   BENCH_WORKLOAD=mail npm run bench:profile              # keyed mail acceptance (an SMTP server that never answers)
 *   BENCH_TARGET=bare npm run bench:profile                # the bare baseline (bench/baselines/bare.ts) under the same load
 *   BENCH_WORKLOAD=user-select npm run bench:profile       # a signed-in user's select under row-level security
 *   BENCH_WORKLOAD=owned-select npm run bench:profile      # the same rows with a service key (user-select's yardstick)
 *   BENCH_WORKLOAD=tx npm run bench:profile                # transaction rounds (begin, 3 inserts, commit), one wrk thread per connection
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  BENCH_ITEMS_SQL,
  BENCH_LOG_SQL,
  benchDb,
  benchOwnedSql,
  ownedSelectLua,
  benchKey,
  benchToken,
  freePort,
  LUA_SHOW,
  mailLua,
  withNonce,
  requireWrk,
  selectLua,
  benchSelect,
  txLua,
  waitFor,
} from './support';
import { openBasalt } from '../src/services';
import { buildStatement } from '../src/modules/database/query-builder';

const ROOT = resolve(import.meta.dir, '..');
const WORKLOAD = process.env.BENCH_WORKLOAD ?? 'select';
const ENGINE = (process.env.BENCH_ENGINE ?? 'external') as 'external' | 'embedded';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const TARGET = process.env.BENCH_TARGET ?? 'basalt';
if (TARGET !== 'basalt' && TARGET !== 'bare') {
  console.error('BENCH_TARGET is basalt or bare');
  process.exit(2);
}
if (!['select', 'me', 'mail', 'user-select', 'owned-select', 'tx'].includes(WORKLOAD)) {
  console.error('BENCH_WORKLOAD is select, me, mail, user-select, owned-select or tx');
  process.exit(2);
}

const wrkBin = requireWrk('bench:profile');
const db = await benchDb(ENGINE);
if (!db) process.exit(0);
// Mail goes to a server that accepts connections and never answers: the worker's sends wait (as in bench:http).
const smtp = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
const env = {
  ...db.env,
  BASALT_AUTH_JWT_SECRET: `bench-secret-${'x'.repeat(40)}`,
  BASALT_LOG_LEVEL: 'warn',
  BASALT_MAIL_SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
  BASALT_MAIL_FROM: 'bench@example.com',
  // Transaction rounds: every wrk connection holds one of the key's transactions (as in bench:http).
  BASALT_DB_MAX_TRANSACTIONS_PER_KEY: '1000',
};
const p = await openBasalt({ env, migrate: true });
let key: string;
let token: string;
let uid: string;
let selectSql: string;
let poolMax: number;
try {
  await p.db.exec(BENCH_ITEMS_SQL + BENCH_LOG_SQL);
  key = await benchKey(p, ['db:query', 'mail:send'], ['bench_items', 'bench_log', 'bench_owned']);
  token = await benchToken(p);
  uid = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).sub;
  if (WORKLOAD.endsWith('owned-select') || WORKLOAD === 'user-select') await p.db.exec(benchOwnedSql(uid));
  // The statement Basalt builds for the select workload, for the baseline to run as it is.
  selectSql = buildStatement(
    benchSelect(0) as never,
    (await p.services.database.catalog.refresh()).tables.get('bench_items')!,
    {
      maxLimit: 1000,
    },
  ).sql;
  poolMax = p.settings.get<number>('database.pool_max');
} finally {
  await p.shutdown();
}

const out = mkdtempSync(join(tmpdir(), 'basalt-profile-'));
const name = `${WORKLOAD}-${ENGINE}${TARGET === 'bare' ? '-bare' : ''}.md`;
const port = await freePort();
const profiled = (script: string, ...args: string[]) => [
  process.execPath,
  '--cpu-prof-md',
  `--cpu-prof-dir=${out}`,
  `--cpu-prof-name=${name}`,
  script,
  ...args,
];
const server =
  TARGET === 'bare'
    ? Bun.spawn(profiled(join(import.meta.dir, 'baselines/bare.ts')), {
        env: {
          ...process.env,
          BENCH_PORT: String(port),
          BENCH_POOL_MAX: String(poolMax),
          BENCH_SELECT_SQL: selectSql,
          BENCH_JWT_SECRET: env.BASALT_AUTH_JWT_SECRET,
          ...(ENGINE === 'external' ? { BENCH_DB_URL: db.url } : { BENCH_PG_DIR: join(db.dataDir, 'pg') }),
        },
        stdout: 'ignore',
        stderr: 'inherit',
      })
    : Bun.spawn(profiled(join(ROOT, 'src/main.ts'), 'serve'), {
        env: { ...process.env, ...env, BASALT_WEB_PORT: String(port) },
        cwd: db.dataDir,
        stdout: 'ignore',
        stderr: 'inherit',
      });
try {
  const url = `http://127.0.0.1:${port}`;
  await waitFor(TARGET === 'bare' ? `${url}/` : `${url}/readyz`, server, TARGET === 'bare' ? 'the baseline' : 'basalt');
  let script = join(out, 'load.lua');
  const me = `${LUA_SHOW}wrk.method = "GET"\nwrk.path = "/api/v1/auth/me"\nwrk.headers["Authorization"] = "Bearer ${token}"\nresponse = function(status, headers, body) show(status, body) end\n`;
  const scripts: Record<string, string> = {
    select: selectLua(key),
    mail: mailLua(key),
    me,
    'user-select': ownedSelectLua({ token }),
    'owned-select': ownedSelectLua({ key, uid }),
    tx: txLua(key),
  };
  writeFileSync(script, scripts[WORKLOAD]!);
  if (WORKLOAD === 'mail') script = withNonce(script);
  // Transaction rounds: one wrk thread per connection, so each connection walks its own round (as bench:http).
  const threads = WORKLOAD === 'tx' ? CONNECTIONS : 2;
  const load = Bun.spawn(
    [wrkBin, `-t${threads}`, `-c${CONNECTIONS}`, `-d${SECONDS}s`, '--latency', '-s', script, url],
    {
      stdout: 'pipe',
    },
  );
  const report = await new Response(load.stdout).text();
  console.log(
    report
      .split('\n')
      .filter((l) => /Requests\/sec|50%|99%/.test(l))
      .join('\n'),
  );
} finally {
  server.kill('SIGTERM');
  await server.exited;
  smtp.stop(true);
  await db.drop();
}
console.log(`\nprofile: ${join(out, name)} (see its "Files" table for the time per file)`);
