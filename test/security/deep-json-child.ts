/**
 * Run by deep-json.test.ts in a child process, because what it guards against — the
 * embedded engine spinning inside its WebAssembly — blocks the JS thread for good, so
 * no in-process timeout could end the test. Prints one JSON line of outcomes.
 *
 * The sequence from the probe: a jsonb value nested 20,000 levels (past the JS engine's
 * stack limit inside PGlite's recursive JSON parser), then statements that raise an
 * ordinary PostgreSQL error (NUL in text, NUL escape in jsonb). Without the guard in
 * src/db/embedded-guard.ts the first "succeeds" with no rows and the next error never
 * returns.
 */
import { startServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { PgError } from '../../src/db/engine';

const deep = (n: number) => '['.repeat(n) + '1' + ']'.repeat(n);
const out: Record<string, unknown> = {};
const s = await startServer('embedded', { env: { BASALT_WEB_MAX_JSON_DEPTH: process.argv[2] ?? '64' } });
const db = s.platform.db;
const outcome = async (f: () => Promise<unknown>) => {
  try {
    await f();
    return 'ok';
  } catch (e) {
    return e instanceof PgError ? e.code : String(e);
  }
};
try {
  await db.exec('CREATE TABLE public.customers (id serial PRIMARY KEY, email text, meta jsonb)');

  // The engine itself, below any HTTP bound.
  for (const depth of [20_000, 50_000]) {
    out[`engine ${depth} levels`] = await outcome(() =>
      db.query('SELECT id FROM public.customers WHERE meta = $1::text::jsonb', [deep(depth)]),
    );
    out[`engine NUL in text after ${depth}`] = await outcome(() =>
      db.query('SELECT $1::text AS e', ['nulz\u0000@example.com']),
    );
    out[`engine NUL in jsonb after ${depth}`] = await outcome(() =>
      db.query('INSERT INTO public.customers (meta) VALUES ($1::text::jsonb)', ['{"a":"\\u0000"}']),
    );
  }
  // Inside a transaction: the statement fails, the transaction is aborted as for any error.
  // 50,000 levels: whether 20,000 pass the JS engine's stack depends on how deep the JS stack
  // already is at the call (one CI run parsed them inside a transaction); 50,000 never fit.
  const tx = await db.begin();
  await tx.query("INSERT INTO public.customers (email) VALUES ('in-tx@example.com')");
  // Were it to pass, the answer is shown: a row [{"n":false}], or none if the engine went wrong.
  let answer = '';
  out['tx deep'] = await outcome(async () => {
    const r = await tx.query('SELECT $1::text::jsonb IS NULL AS n', [deep(50_000)]);
    answer = JSON.stringify(r.rows);
  });
  if (answer) out['tx deep'] += ` ${answer}`;
  out['tx after'] = await outcome(() => tx.query('SELECT 1'));
  await tx.rollback();
  out['rolled back'] =
    (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM public.customers WHERE email = 'in-tx@example.com'"))
      .rows[0]!.n === 0;
  out['select 1'] = await outcome(() => db.query('SELECT 1'));

  // Over HTTP: the probe's requests.
  const key = await createKey(s, { permissions: ['db:query'], tables: ['customers'] });
  const body = `{"entity":"customers","action":"select","fields":["id"],"filters":[{"field":"meta","op":"eq","value":${deep(20_000)}}]}`;
  const r1 = await fetch(s.publicUrl + '/api/v1/db/query', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body,
  });
  out['http deep select'] = [r1.status, ((await r1.json()) as any).error?.code];
  const r2 = await s.req('POST', '/api/v1/auth/login', {
    body: { email: 'nulz\u0000@example.com', password: 'whatever-password' },
  });
  out['http login with NUL answers'] = r2.status < 500;
  const r3 = await s.req('POST', '/api/v1/db/query', {
    headers: { 'x-api-key': key },
    body: { entity: 'customers', action: 'insert', data: { meta: { a: '\u0000' } } },
  });
  out['http insert NUL escape'] = r3.status;
  out.healthz = (await s.req('GET', '/healthz')).status;
  out.readyz = (await s.req('GET', '/readyz')).status;
} finally {
  await s.stop();
}
console.log(JSON.stringify(out));
process.exit(0);
