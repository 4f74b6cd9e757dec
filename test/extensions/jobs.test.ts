/**
 * Jobs, cron and hooks of extensions (docs/extensions.md) against `basalt serve` processes
 * with a real extension folder (./jobs-probe.ts), on both engines: idempotency, enqueue in a
 * transaction, retries, dead, timeout, cancel and retry through `basalt jobs`; a runner
 * SIGKILLed mid-job and the job finished by another instance (external: the other of two;
 * embedded: the next process on the data dir); cron once per slot (external: two instances)
 * and one catch-up after downtime; a hook that sees every committed change written by 8
 * concurrent clients while the instance is SIGKILLed twice, none of a rolled-back
 * transaction, each client's changes in commit order. Runs against the executable
 * (scripts/test.ts): the killed process is then the compiled `basalt serve`.
 *
 * The hook's load is HOOK_ROWS committed rows (10,000, BASALT_TEST_HOOK_ROWS to change it),
 * TX_ROWS to a transaction, each client sending WRITE_BATCH transactions to a request.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { runCli } from '../helpers/cli';
import { serveProcess, type ServedProcess } from '../helpers/serve-process';
import { eventually } from '../helpers/wait';
import { type HookLine, ITEMS_MIGRATION, PROBE, PROBE_MIGRATION } from './jobs-probe';

const CLIENTS = 8;
const HOOK_ROWS = Math.ceil((Number(process.env.BASALT_TEST_HOOK_ROWS) || 10_000) / CLIENTS) * CLIENTS;
const TX_ROWS = 4;
const WRITE_BATCH = 10;

type Instance = ServedProcess;

interface Seen {
  kind: string;
  key: string;
  attempt: number;
  pid: number;
  data: any;
}

/** `basalt serve` with the probe extension; resolves once it listens (and, embedded, takes commands). */
async function serve(db: FreshDb, env: Record<string, string>): Promise<Instance> {
  const served = await serveProcess(db, env);
  if (!db.url)
    await eventually(() => existsSync(join(db.dataDir, 'basalt.sock')), { timeout: 30_000, what: 'the socket' });
  return served;
}

async function kill(i: Instance, signal: 'SIGKILL' | 'SIGTERM' = 'SIGTERM'): Promise<void> {
  i.proc.kill(signal);
  await i.proc.exited;
}

async function call(i: Instance, method: string, path: string, body?: unknown): Promise<any> {
  const r = await fetch(`${i.url}/api/module/jobs-probe${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await r.json()) as any;
  if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
  return json.data;
}

const enqueue = (i: Instance, body: Record<string, unknown>): Promise<string> =>
  call(i, 'POST', '/enqueue', body).then((d) => d.id);
const seen = (i: Instance, kind: string): Promise<Seen[]> => call(i, 'GET', `/seen?kind=${kind}`).then((d) => d.rows);
const job = (i: Instance, id: string): Promise<{ state: string; attempts: number; errors: any[] } | null> =>
  call(i, 'GET', `/job/${id}`).then((d) => d.job);
const untilState = (i: Instance, id: string, state: string, timeout = 20_000) =>
  eventually(() => job(i, id), {
    until: (j) => j?.state === state,
    timeout,
    interval: 100,
    what: `job ${id} ${state}`,
  });

describe.each(ENGINES)('jobs, cron and hooks of an extension (%s)', (engine) => {
  let db: FreshDb;
  let env: Record<string, string>;
  let a: Instance;
  /** Every instance started, so afterAll ends the ones still running. */
  const started: Instance[] = [];
  const start = async () => {
    const i = await serve(db, env);
    started.push(i);
    return i;
  };
  const cli = (args: string[]) => runCli(args, env, { cwd: db.dataDir });
  /** What the `items` hook was handed so far, in order, by every process (jobs-probe.ts). */
  const hookLines = (): HookLine[] => {
    const file = join(db.dataDir, 'items-hook.log');
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as HookLine);
  };

  beforeAll(async () => {
    db = await freshDb(engine);
    const ext = join(db.dataDir, 'ext');
    mkdirSync(join(ext, 'jobs-probe', 'migrations'), { recursive: true });
    writeFileSync(join(ext, 'jobs-probe', 'index.ts'), PROBE);
    writeFileSync(join(ext, 'jobs-probe', 'migrations', '001_seen.sql'), PROBE_MIGRATION);
    const migrations = join(db.dataDir, 'app-migrations');
    mkdirSync(migrations, { recursive: true });
    writeFileSync(join(migrations, '001_items.sql'), ITEMS_MIGRATION);
    env = {
      ...db.env,
      BASALT_EXTENSIONS_DIR: ext,
      BASALT_MIGRATIONS_DIR: migrations,
      BASALT_JOBS_LEASE_MS: '2000',
      JOBS_PROBE_HOOK_LOG: join(db.dataDir, 'items-hook.log'),
    };
    a = await start();
  }, 180_000);

  afterAll(async () => {
    for (const i of started) if (i.proc.exitCode === null) await kill(i, 'SIGKILL');
    await db?.drop();
  });

  test('a job runs once; the same idempotency key returns the first id and queues nothing', async () => {
    const first = await enqueue(a, { name: 'echo', payload: { k: 'idem' }, key: 'same' });
    const again = await enqueue(a, { name: 'echo', payload: { k: 'idem-2' }, key: 'same' });
    expect(again).toBe(first);
    await untilState(a, first, 'succeeded');
    // A later job is the sentinel: once it ran, a second run of the first would have too.
    await untilState(a, await enqueue(a, { name: 'echo', payload: { k: 'after-idem' } }), 'succeeded');
    const rows = await seen(a, 'echo');
    expect(rows.filter((r) => r.key === 'idem').length).toBe(1);
    expect(rows.some((r) => r.key === 'idem-2')).toBe(false);
  });

  test('enqueued in a transaction, a job exists only if it commits', async () => {
    const kept = await enqueue(a, { name: 'echo', payload: { k: 'tx-commit' }, rollback: false });
    const dropped = await enqueue(a, { name: 'echo', payload: { k: 'tx-rollback' }, rollback: true });
    await untilState(a, kept, 'succeeded');
    expect(await job(a, dropped)).toBeNull();
    expect((await seen(a, 'echo')).some((r) => r.key === 'tx-rollback')).toBe(false);
  });

  test('a failing job is retried after its backoff; one that keeps failing is dead with every error', async () => {
    const flaky = await enqueue(a, { name: 'flaky', payload: { k: 'f', failUntil: 3 } });
    const doomed = await enqueue(a, { name: 'doomed', payload: { k: 'd' } });
    const ok = await untilState(a, flaky, 'succeeded');
    expect(ok!.attempts).toBe(3);
    expect(ok!.errors.map((e) => [e.attempt, e.error.split('\n')[0]])).toEqual([
      [1, 'Error: flaky attempt 1'],
      [2, 'Error: flaky attempt 2'],
    ]);
    const dead = await untilState(a, doomed, 'dead');
    expect(dead!.errors.map((e) => e.attempt)).toEqual([1, 2]);
    expect((await seen(a, 'doomed')).map((r) => r.attempt)).toEqual([1, 2]);
  });

  test('a handler past its timeoutMs sees its signal abort and the attempt fails', async () => {
    const id = await enqueue(a, { name: 'stuck', payload: {} });
    const dead = await untilState(a, id, 'dead');
    expect(dead!.errors[0].error).toContain('timed out after 300 ms');
  });

  test('basalt jobs cancels a queued job and retries a cancelled or dead one', async () => {
    const later = await enqueue(a, { name: 'echo', payload: { k: 'later' }, delayMs: 600_000 });
    const cancelled = await cli(['jobs', 'cancel', later]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toContain(`job ${later} cancelled`);
    expect((await job(a, later))!.state).toBe('cancelled');
    const again = await cli(['jobs', 'cancel', later]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('only a queued job can be cancelled');

    expect((await cli(['jobs', 'retry', later])).code).toBe(0);
    await untilState(a, later, 'succeeded');

    const doomed = await enqueue(a, { name: 'doomed', payload: { k: 'd2' } });
    await untilState(a, doomed, 'dead');
    expect((await cli(['jobs', 'retry', doomed])).code).toBe(0);
    const dead = await eventually(() => job(a, doomed), {
      until: (j) => j?.state === 'dead' && j.errors.length === 4,
      timeout: 20_000,
      what: 'the retried job dead again with four errors',
    });
    expect(dead!.errors.map((e) => e.attempt)).toEqual([1, 2, 1, 2]);

    const listed = await cli(['jobs', 'list', '--extension', 'jobs-probe', '--state', 'dead', '--json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout).map((j: { id: string }) => j.id)).toContain(doomed);
    const unknown = await cli(['jobs', 'retry', crypto.randomUUID()]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('No job has id');
  });

  test('a sign-up and a sign-in reach the platform-event hooks', async () => {
    const email = `hooked-${Date.now()}@example.com`;
    const r = await fetch(`${a.url}/api/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'correct horse battery' }),
    });
    expect(r.status).toBe(201);
    const created = await eventually(() => seen(a, 'user_created'), {
      until: (rows) => rows.some((x) => x.key === email),
      timeout: 15_000,
    });
    const ev = created.find((x) => x.key === email)!.data;
    expect(ev).toMatchObject({ type: 'auth.user_created', user: { email } });
    expect(typeof ev.id).toBe('number');
  });

  test.if(engine === 'external')('a change written with plain SQL beside the platform reaches the hook', async () => {
    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      await sql`INSERT INTO public.items (client, n) VALUES (99, 1)`;
    } finally {
      await sql.end();
    }
    await eventually(() => hookLines().some((l) => l.client === 99 && l.action === 'insert'), {
      timeout: 15_000,
      what: 'the psql insert at the hook',
    });
  });

  test('a runner SIGKILLed mid-job: the job is finished by another instance', async () => {
    const other = engine === 'external' ? await start() : undefined;
    const id = await enqueue(a, { name: 'slow', payload: { k: 'killed', ms: 3000 } });
    const first = await eventually(() => seen(a, 'slow-started'), { until: (r) => r.length > 0, timeout: 15_000 });
    const runnerPid = first[0]!.pid;
    const runner = started.find((i) => i.proc.pid === runnerPid);
    expect(runner).toBeDefined();
    await kill(runner!, 'SIGKILL');
    // The survivor (external) or the next process on the data dir (embedded) takes it over.
    const survivor = other && runner === other ? a : (other ?? (a = await start()));
    if (runner === a && other) a = other;
    await untilState(survivor, id, 'succeeded', 30_000);
    const done = await seen(survivor, 'slow-done');
    expect(done.length).toBe(1);
    expect(done[0]!.pid).not.toBe(runnerPid);
    expect(done[0]!.attempt).toBe(2);
    // Keep one instance for the tests below.
    for (const i of started) if (i !== a && i.proc.exitCode === null) await kill(i);
  }, 90_000);

  test('cron runs each slot once across instances, and one catch-up after downtime', async () => {
    const b = engine === 'external' ? await start() : undefined;
    const runs = await eventually(() => seen(a, 'cron'), {
      until: (r) => r.length >= 4,
      timeout: 30_000,
      what: 'four cron runs',
    });
    if (b) await kill(b);
    // A first attempt per slot (a run whose instance was SIGKILLed by an earlier test may have
    // a second attempt: at least once is the promise for a job whose runner dies).
    const slots = runs.filter((r) => r.attempt === 1).map((r) => r.key);
    // No slot ran twice, and none was lost while instances ran: the recorded slots (run or,
    // had a tick come late, skipped) follow one another two seconds apart.
    expect(new Set(slots).size).toBe(slots.length);
    const recorded = (await call(a, 'GET', '/cron-runs')).rows as { slot: string; skipped: boolean }[];
    const times = recorded.map((r) => Date.parse(r.slot + 'Z'));
    for (let k = 1; k < times.length; k++) expect(times[k]! - times[k - 1]!).toBe(2000);
    for (const s of slots)
      expect(recorded.some((r) => !r.skipped && Date.parse(r.slot + 'Z') === Date.parse(s))).toBe(true);

    // Every instance down for a few slots.
    await kill(a);
    const lastBefore = recorded.at(-1)?.slot ?? '';
    await Bun.sleep(7000);
    a = await start();
    const before = slots.length;
    const after = await eventually(
      () => call(a, 'GET', '/cron-runs').then((d) => (d.rows as typeof recorded).filter((r) => r.slot > lastBefore)),
      { until: (rows) => rows.some((r) => r.skipped), timeout: 20_000, what: 'the missed slots recorded as skipped' },
    );
    const skipped = after.filter((r) => r.skipped);
    expect(skipped.length).toBeGreaterThanOrEqual(2);
    const lastSkipped = skipped.at(-1)!.slot;
    const catchUp = after.find((r) => !r.skipped && r.slot > lastSkipped);
    expect(catchUp).toBeDefined();
    expect(Date.parse(catchUp!.slot + 'Z') - Date.parse(lastSkipped + 'Z')).toBe(2000);
    const caughtUp = Date.parse(catchUp!.slot + 'Z');
    const all = await eventually(() => seen(a, 'cron'), {
      until: (rows) => rows.some((r) => Date.parse(r.key) === caughtUp),
      timeout: 20_000,
      what: 'the catch-up run',
    });
    const ran = all.filter((r) => r.attempt === 1);
    expect(ran.length).toBeGreaterThan(before);
    expect(new Set(ran.map((r) => r.key)).size).toBe(ran.length);
    // No missed slot other than the catch-up ran.
    for (const r of skipped) expect(all.some((x) => Date.parse(x.key) === Date.parse(r.slot + 'Z'))).toBe(false);
  }, 120_000);

  test(`a hook sees every committed change of ${HOOK_ROWS} rows from ${CLIENTS} concurrent clients across two SIGKILLs, in commit order`, async () => {
    let live = a;
    const perClient = HOOK_ROWS / CLIENTS;
    /** POST /write until it answers (the instance may be down): a row written twice is kept once. */
    const write = async (client: number, txs: { ns: number[]; rollback?: boolean }[]) => {
      for (const until = Date.now() + 120_000; ; ) {
        try {
          return await call(live, 'POST', '/write', { client, txs });
        } catch (e) {
          if (Date.now() > until) throw e;
          await Bun.sleep(50);
        }
      }
    };
    /** A client's rows 1..perClient, TX_ROWS to a transaction, WRITE_BATCH transactions to a request. */
    const writer = async (client: number) => {
      let txs: { ns: number[]; rollback?: boolean }[] = [];
      for (let from = 1, k = 1; from <= perClient; from += TX_ROWS, k++) {
        const ns = Array.from({ length: Math.min(TX_ROWS, perClient - from + 1) }, (_, i) => from + i);
        // Before every ninth transaction, one that is rolled back: none of it may reach the hook.
        if (k % 9 === 0) txs.push({ ns: ns.map((n) => -n), rollback: true });
        txs.push({ ns });
        if (txs.length >= WRITE_BATCH || from + TX_ROWS > perClient) {
          await write(client, txs);
          txs = [];
        }
      }
    };
    // The hook's first start turns its table's capture on, just after the instance listens.
    await eventually(() => call(live, 'GET', '/hook-started').then((d) => d.started), {
      interval: 50,
      what: 'the hook started',
    });
    const writers = Promise.all(Array.from({ length: CLIENTS }, (_, c) => writer(c + 1)));
    const insertsSeen = () =>
      new Set(
        hookLines()
          .filter((l) => l.action === 'insert')
          .map((l) => `${l.client}:${l.n}`),
      );
    for (const share of [0.3, 0.6]) {
      await eventually(() => insertsSeen().size >= share * HOOK_ROWS, {
        timeout: 120_000,
        interval: 50,
        what: `the hook past ${share * 100}% of ${HOOK_ROWS} rows`,
      });
      await kill(live, 'SIGKILL');
      live = await start();
      a = live;
    }
    await writers;
    // The sentinel: committed after every other write was acknowledged, so delivered after all
    // of them (commit order). Once the hook has it, anything missing now was missed.
    await write(CLIENTS + 1, [{ ns: [1] }]);
    await eventually(() => hookLines().some((l) => l.client === CLIENTS + 1), {
      timeout: 120_000,
      interval: 50,
      what: 'the sentinel at the hook',
    });
    const lines = hookLines();
    const inserts = lines.filter((l) => l.action === 'insert' && l.client <= CLIENTS);
    expect(lines.every((l) => l.action === 'insert')).toBe(true);
    expect(inserts.filter((l) => l.n < 0)).toEqual([]);
    const distinct = new Set(inserts.map((l) => `${l.client}:${l.n}`));
    const missing: string[] = [];
    for (let c = 1; c <= CLIENTS; c++)
      for (let n = 1; n <= perClient; n++) if (!distinct.has(`${c}:${n}`)) missing.push(`${c}:${n}`);
    expect(missing).toEqual([]);
    expect(distinct.size).toBe(HOOK_ROWS);
    // Order: in each delivery, event ids increase; a redelivery after a kill starts again from
    // the checkpoint. So the first sighting of each event is in id order, and each client's
    // rows (committed one after another) arrive in its own order.
    const firstSeen = new Map<number, HookLine>();
    for (const l of lines) if (!firstSeen.has(l.id)) firstSeen.set(l.id, l);
    const ids = [...firstSeen.keys()];
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    for (let c = 1; c <= CLIENTS; c++) {
      const ns = [...firstSeen.values()].filter((l) => l.client === c).map((l) => l.n);
      expect(ns).toEqual([...ns].sort((x, y) => x - y));
    }
  }, 600_000);
});
