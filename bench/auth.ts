/**
 * Public Auth cost, as ratios against baselines measured in the same run:
 *  - GET /api/v1/auth/me (JWT verify + session check + user lookup) against a minimal
 *    Bun.serve that only verifies the same JWT with the same verifier (fast-jwt, the checks
 *    of src/modules/auth/jwt.ts).
 *  - POST /api/v1/auth/login (argon2id verify + counters + session) against
 *    Bun.password.verify alone with the same parameters, in process.
 * Traffic goes to 127.0.0.1 only and is bounded in count.
 *
 *   bun bench/auth.ts                  # embedded engine
 *   BASALT_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun bench/auth.ts   # both engines
 */
import { createVerifier } from 'fast-jwt';
import { ACCESS_TOKEN_CHECKS } from '../src/modules/auth/jwt';
import { ENGINES } from '../test/helpers/engines';
import { startServer } from '../test/helpers/server';
import { getOrCreateSecret } from '../src/db/secrets';
import { ARGON2 } from '../src/modules/auth/passwords';
import { countedLoad, fmt, median, printTable } from './support';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 3000);
const LOGINS = Number(process.env.BENCH_LOGINS ?? 60);
const CONCURRENCY = 16;
const LOGIN_CONCURRENCY = 4;
const ROUNDS = 3;
const PASSWORD = 'correct horse battery';
const rows: string[][] = [];
for (const engine of ENGINES) {
  const s = await startServer(engine, {
    env: { BASALT_AUTH_RATE_LIMIT_LOGIN_PER_IP: '100000', BASALT_AUTH_RATE_LIMIT_LOGIN_PER_ACCOUNT: '100000' },
  });
  const secret = await getOrCreateSecret(s.platform.db, 'jwt');
  // Baseline server: verifies the same token with the same verifier and answers JSON.
  const verify = createVerifier({ ...ACCESS_TOKEN_CHECKS, key: secret });
  const baseline = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch(req) {
      try {
        const claims = verify(req.headers.get('authorization')?.slice(7) ?? '') as { sub: string };
        return Response.json({ success: true, data: { sub: claims.sub } });
      } catch {
        return new Response(null, { status: 401 });
      }
    },
  });
  try {
    const email = `bench-${Date.now()}@example.com`;
    await s.req('POST', '/api/v1/auth/register', { body: { email, password: PASSWORD } });
    const token = (await s.req('POST', '/api/v1/auth/login', { body: { email, password: PASSWORD } })).body.data
      .access_token as string;
    const headers = { authorization: `Bearer ${token}` };
    const me = () => fetch(`${s.publicUrl}/api/v1/auth/me`, { headers });
    const base = () => fetch(baseline.url, { headers });
    await countedLoad(500, CONCURRENCY, base, 200); // warm-up
    await countedLoad(500, CONCURRENCY, me, 200);
    const r: Record<string, number[]> = { base: [], me: [] };
    for (let i = 0; i < ROUNDS; i++) {
      r.base!.push((await countedLoad(REQUESTS, CONCURRENCY, base, 200)).perSecond);
      r.me!.push((await countedLoad(REQUESTS, CONCURRENCY, me, 200)).perSecond);
    }
    const [b, m] = [median(r.base!), median(r.me!)];
    rows.push([engine, 'Bun.serve + JWT verify only (baseline)', `${fmt(b)} req/s`, '', '1.00']);
    rows.push([engine, 'GET /api/v1/auth/me', `${fmt(m)} req/s`, '', (m / b).toFixed(2)]);

    // Login: argon2id dominates. Baseline: the same verify in process, one at a time.
    const hash = await Bun.password.hash(PASSWORD, ARGON2);
    const verifyTimes: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      await Bun.password.verify(PASSWORD, hash);
      verifyTimes.push(performance.now() - t0);
    }
    const vp50 = median(verifyTimes);
    const body = JSON.stringify({ email, password: PASSWORD });
    const login = () =>
      fetch(`${s.publicUrl}/api/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
    const serial = await countedLoad(Math.ceil(LOGINS / 3), 1, login, 200);
    const parallel = await countedLoad(LOGINS, LOGIN_CONCURRENCY, login, 200);
    rows.push([
      engine,
      `argon2id verify in process (m=${ARGON2.memoryCost} KiB, t=${ARGON2.timeCost}, p=1) (baseline)`,
      `${fmt(1000 / vp50)} /s`,
      `${vp50.toFixed(1)} ms`,
      '1.00',
    ]);
    rows.push([
      engine,
      'POST /api/v1/auth/login, one at a time',
      `${fmt(serial.perSecond)} /s`,
      `${serial.p50.toFixed(1)} ms`,
      (serial.perSecond / (1000 / vp50)).toFixed(2),
    ]);
    rows.push([
      engine,
      `POST /api/v1/auth/login, ${LOGIN_CONCURRENCY} concurrent`,
      `${fmt(parallel.perSecond)} /s`,
      `${parallel.p50.toFixed(1)} ms`,
      (parallel.perSecond / (1000 / vp50)).toFixed(2),
    ]);
  } finally {
    baseline.stop(true);
    await s.stop();
  }
}

const head = ['engine', 'scenario', 'throughput', 'p50', 'ratio'];
printTable(
  [head, ...rows],
  `Public Auth (${navigator.hardwareConcurrency} CPUs; /me: median of ${ROUNDS} interleaved rounds of ${REQUESTS} requests, concurrency ${CONCURRENCY}; login: ${Math.ceil(LOGINS / 3)} serial + ${LOGINS} at concurrency ${LOGIN_CONCURRENCY})`,
);
