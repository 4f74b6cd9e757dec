/**
 * Upgrading under load (docs/operations.md, "Upgrading"): a second build of the executable,
 * stamped with another version, started with `basalt serve` on the same data dir and port
 * while the first serves 16 connections of mixed requests, takes it over. No request fails,
 * every acknowledged write is there afterwards, every mail accepted is delivered once (sends
 * under way as the old process stops: docs/mail.md, "The queue"), and the time requests
 * waited is reported.
 *
 * Two builds rather than one executable started twice: what changes in an upgrade is the
 * file, so the test proves the swap by the version each answer names (/healthz); the
 * takeover itself is the same code either way.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Subprocess } from 'bun';
import { bareEnv, buildVersion, freePort, installBinary, untilHealthy } from '../helpers/binary';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { createKeyByCli } from '../helpers/keys';
import { eventually } from '../helpers/wait';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';

const CONNECTIONS = 16;
const NEXT_VERSION = '99.0.0-next';

type Proc = Subprocess<'ignore', 'pipe', 'pipe'>;

/** `basalt serve` with its output read as it comes (a full pipe would stop the process). */
function serve(exe: string, cwd: string, env: Record<string, string>) {
  const proc: Proc = Bun.spawn([exe, 'serve'], {
    cwd,
    env: bareEnv(cwd, env),
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  let out = '';
  const read = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s) out += Buffer.from(chunk).toString('utf8');
  };
  const done = Promise.all([read(proc.stdout), read(proc.stderr)]);
  const output = async () => {
    await done;
    return out;
  };
  return { proc, output, sofar: () => out };
}

/** The JSON log lines of `out` with message `msg`. */
function logLines(out: string, msg: string): Record<string, unknown>[] {
  return out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === msg);
}

/**
 * `exe` serving with `env` (handed to `track` at once, for afterAll), once it answers at `url`
 * and its management socket is open; and a service key for `items`, made through that socket
 * on the embedded engine.
 */
async function startServing(
  exe: string,
  dir: string,
  env: Record<string, string>,
  url: string,
  track: (s: ReturnType<typeof serve>) => void,
): Promise<{ key: string }> {
  const s = serve(exe, dir, env);
  track(s);
  expect(await untilHealthy(s.proc, url, 120_000)).toBe(true);
  await eventually(() => existsSync(join(dir, 'basalt_data', 'basalt.sock')), {
    timeout: 30_000,
    what: 'the management socket',
  });
  const { key } = await createKeyByCli(
    exe,
    dir,
    { ...env, BASALT_LOG_LEVEL: 'warn' },
    {
      service: 'load',
      permissions: ['db:query', 'mail:send'],
      tables: ['items'],
    },
  );
  return { key };
}

describe.each(ENGINES)('an upgrade under load on %s', (engine) => {
  let dir: string;
  let exe: string;
  let next: string;
  let db: FreshDb | undefined;
  let env: Record<string, string>;
  let url: string;
  let key: string;
  let old: ReturnType<typeof serve>;
  let neu: ReturnType<typeof serve> | undefined;
  let broken: ReturnType<typeof serve> | undefined;
  let sink: SmtpSink;

  beforeAll(async () => {
    // Sends take a while, so some are under way when the old process hands over.
    sink = await startSmtpSink();
    sink.delay(50);
    ({ dir, exe } = await installBinary());
    next = join(dir, 'basalt-next');
    copyFileSync(await buildVersion(NEXT_VERSION), next);
    mkdirSync(join(dir, 'migrations'));
    writeFileSync(
      join(dir, 'migrations', '001_items.sql'),
      'CREATE TABLE items (id bigserial PRIMARY KEY, v text NOT NULL UNIQUE);',
    );
    db = engine === 'external' ? await freshDb('external') : undefined;
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    env = {
      BASALT_WEB_PORT: String(port),
      BASALT_LOG_LEVEL: 'info',
      BASALT_MIGRATIONS_DIR: join(dir, 'migrations'),
      BASALT_MAIL_SMTP_URL: sink.url,
      BASALT_MAIL_FROM: 'app@example.com',
      BASALT_MAIL_CONCURRENCY: '8',
      ...(db ? { BASALT_DATABASE_URL: db.url } : {}),
    };
    ({ key } = await startServing(exe, dir, env, url, (s) => (old = s)));
  }, 300_000);
  afterAll(async () => {
    old?.proc.kill('SIGKILL');
    neu?.proc.kill('SIGKILL');
    broken?.proc.kill('SIGKILL');
    await Promise.all([old?.proc.exited, neu?.proc.exited, broken?.proc.exited]);
    await sink?.close();
    await db?.drop();
  });

  test('16 connections of reads, writes and mail through the swap: none fails, nothing lost or sent twice', async () => {
    const query = (body: unknown) =>
      fetch(url + '/api/v1/db/query', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify({ entity: 'items', ...(body as object) }),
      });
    const acknowledged: string[] = [];
    const failures: string[] = [];
    const samples: { at: number; ms: number; kind: string }[] = [];
    const versions = new Set<string>();
    let stop = false;
    const worker = async (w: number) => {
      for (let n = 0; !stop; n++) {
        const start = performance.now();
        const v = `w${w}-${n}`;
        try {
          if (n % 3 === 0) {
            const r = await query({ action: 'insert', data: { v }, fields: ['v'] });
            const body = (await r.json()) as { data?: { rows: { v: string }[] } };
            if (r.status === 200 && body.data?.rows[0]?.v === v) acknowledged.push(v);
            else failures.push(`insert ${r.status} ${JSON.stringify(body)}`);
          } else if (n % 3 === 1) {
            const r = await query({
              action: 'select',
              fields: ['id', 'v'],
              sort: [{ field: 'id', direction: 'desc' }],
              limit: 5,
            });
            const text = await r.text();
            if (r.status !== 200) failures.push(`select ${r.status} ${text}`);
          } else {
            const r = await fetch(url + '/healthz');
            const body = (await r.json()) as { data?: { version: string } };
            if (r.status === 200 && body.data) versions.add(body.data.version);
            else failures.push(`healthz ${r.status} ${JSON.stringify(body)}`);
          }
        } catch (e) {
          failures.push(`${['insert', 'select', 'healthz'][n % 3]}: ${(e as Error).message}`);
        }
        samples.push({ at: start, ms: performance.now() - start, kind: ['insert', 'select', 'healthz'][n % 3]! });
      }
    };
    // One of the 16 queues mail now and then: each accepted job is delivered once, by one process or the other.
    const mailed: string[] = [];
    const mailWorker = async () => {
      for (let n = 0; !stop; n++) {
        const subject = `takeover ${n}`;
        try {
          const r = await fetch(url + '/api/v1/mail/send', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': key },
            body: JSON.stringify({ to: ['ada@example.com'], subject, text: 't' }),
          });
          if (r.status === 202) mailed.push(subject);
          else failures.push(`mail ${r.status} ${await r.text()}`);
        } catch (e) {
          failures.push(`mail: ${(e as Error).message}`);
        }
        await Bun.sleep(20);
      }
    };
    const load = Promise.all([mailWorker(), ...Array.from({ length: CONNECTIONS - 1 }, (_, w) => worker(w))]);
    await Bun.sleep(1500);
    const before = acknowledged.length;
    const swapStart = performance.now();
    neu = serve(next, dir, env);
    // The old process exits once it has handed over and no request reaches it any more.
    const oldCode = await old.proc.exited;
    const swapEnd = performance.now();
    await Bun.sleep(1500);
    stop = true;
    await load;

    const oldOut = await old.output();
    expect(oldCode).toBe(0);
    expect(failures).toEqual([]);
    expect(neu.proc.exitCode).toBeNull();
    expect(logLines(neu.sofar(), 'took over')).toHaveLength(1);
    // The swap happened under load: writes acknowledged before and after it, both versions answered.
    expect(before).toBeGreaterThan(10);
    expect(acknowledged.length).toBeGreaterThan(before + 10);
    expect(versions.size).toBe(2);
    expect(versions.has(NEXT_VERSION)).toBe(true);
    // Nothing acknowledged is lost: the new process holds every row, read back in pages.
    const stored = new Set<string>();
    for (let after = 0; ; ) {
      const r = await query({
        action: 'select',
        fields: ['id', 'v'],
        filters: [{ field: 'id', op: 'gt', value: after }],
        sort: [{ field: 'id' }],
        limit: 1000,
      });
      expect(r.status).toBe(200);
      const rows = ((await r.json()) as { data: { rows: { id: string; v: string }[] } }).data.rows;
      if (!rows.length) break;
      for (const row of rows) stored.add(row.v);
      after = Number(rows.at(-1)!.id);
    }
    expect(acknowledged.filter((v) => !stored.has(v))).toEqual([]);
    // Every accepted mail arrives, none twice.
    expect(mailed.length).toBeGreaterThan(20);
    await sink.waitFor(mailed.length, 60_000);
    await Bun.sleep(300);
    const subjects = sink.messages.map((m) => m.subject);
    expect(subjects.toSorted()).toEqual(mailed.toSorted());

    // The figures: how long requests waited through the swap.
    const during = samples.filter((s) => s.at >= swapStart && s.at <= swapEnd).map((s) => s.ms);
    const steady = samples.filter((s) => s.at < swapStart).map((s) => s.ms);
    const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)] ?? 0;
    const handed = logLines(oldOut, 'handed over')[0];
    console.log(
      JSON.stringify({
        engine,
        requests: samples.length,
        writes_acknowledged: acknowledged.length,
        mail_accepted: mailed.length,
        swap_ms: Math.round(swapEnd - swapStart),
        steady_p50_ms: Math.round(pct(steady, 0.5)),
        steady_p99_ms: Math.round(pct(steady, 0.99)),
        swap_requests: during.length,
        swap_p50_ms: Math.round(pct(during, 0.5)),
        swap_p99_ms: Math.round(pct(during, 0.99)),
        swap_max_ms: Math.round(Math.max(0, ...during)),
        // The slowest requests, with when they started after the new process was started.
        slowest: samples
          .toSorted((a, b) => b.ms - a.ms)
          .slice(0, 5)
          .map((s) => `${s.kind} at +${Math.round(s.at - swapStart)} ms took ${Math.round(s.ms)} ms`),
        old_process: handed,
      }),
    );
  }, 240_000);

  // Embedded: the running process closes the engine before the new one can migrate, so what
  // waited is refused and the old process exits for its supervisor. External: the new process
  // migrates before it asks, so a failing migration leaves the running one serving.
  test('a new process whose migration fails: 503 restarting (embedded) or nothing changes (external)', async () => {
    expect(neu?.proc.exitCode).toBeNull();
    const bad = join(dir, 'migrations-bad');
    mkdirSync(bad);
    writeFileSync(join(bad, '001_items.sql'), 'CREATE TABLE items (id bigserial PRIMARY KEY, v text NOT NULL UNIQUE);');
    writeFileSync(join(bad, '002_broken.sql'), 'CREATE TABLE broken (;');
    const answers: string[] = [];
    let stop = false;
    const worker = async () => {
      while (!stop) {
        const r = await fetch(url + '/healthz').catch(() => undefined);
        if (!r) break; // the process has gone: nothing listens any more
        const body = (await r.json()) as { error?: { code: string } };
        answers.push(r.status === 200 ? '200' : `${r.status} ${body.error?.code} ${r.headers.get('retry-after')}`);
      }
    };
    const load = Promise.all(Array.from({ length: 4 }, worker));
    await Bun.sleep(300);
    broken = serve(next, dir, { ...env, BASALT_MIGRATIONS_DIR: bad });
    expect(await broken.proc.exited).toBe(1);
    expect(await broken.output()).toContain('002_broken.sql');
    if (engine === 'embedded') {
      expect(await neu!.proc.exited).toBe(1);
      stop = true;
      await load;
      expect(answers).toContain('503 restarting 30');
      expect(
        logLines(await neu!.output(), 'handover: the new process never served; held requests were refused'),
      ).toHaveLength(1);
    } else {
      await Bun.sleep(300);
      stop = true;
      await load;
      expect(neu!.proc.exitCode).toBeNull();
      expect(logLines(neu!.sofar(), 'handing over')).toEqual([]);
    }
    expect(answers).toContain('200');
    expect(answers.filter((a) => a !== '200' && a !== '503 restarting 30')).toEqual([]);
  }, 120_000);
});

describe.each(ENGINES)('a takeover with the public API on its own port, on %s', (engine) => {
  let dir: string;
  let exe: string;
  let db: FreshDb | undefined;
  const procs: ReturnType<typeof serve>[] = [];

  beforeAll(async () => {
    ({ dir, exe } = await installBinary());
    copyFileSync(await buildVersion(NEXT_VERSION), join(dir, 'basalt-next'));
    mkdirSync(join(dir, 'migrations'));
    writeFileSync(join(dir, 'migrations', '001_items.sql'), 'CREATE TABLE items (id bigserial PRIMARY KEY, v text);');
    db = engine === 'external' ? await freshDb('external') : undefined;
  }, 300_000);
  afterAll(async () => {
    for (const p of procs) p.proc.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.proc.exited));
    await db?.drop();
  });

  test('requests to either port through the swap reach the same listener of the new process', async () => {
    const [port, publicPort] = [await freePort(), await freePort()];
    const env = {
      BASALT_WEB_PORT: String(port),
      BASALT_WEB_PUBLIC_API_SEPARATE: 'true',
      BASALT_WEB_PUBLIC_PORT: String(publicPort),
      BASALT_LOG_LEVEL: 'info',
      BASALT_MIGRATIONS_DIR: join(dir, 'migrations'),
      ...(db ? { BASALT_DATABASE_URL: db.url } : {}),
    };
    const main = `http://127.0.0.1:${port}`;
    const pub = `http://127.0.0.1:${publicPort}`;
    let old!: ReturnType<typeof serve>;
    const { key } = await startServing(exe, dir, env, main, (s) => procs.push((old = s)));
    const failures: string[] = [];
    const versions = new Set<string>();
    let inserts = 0;
    let stop = false;
    // The Database API is on the public listener only: a request forwarded to the main one would be a 404.
    const publicLoop = async () => {
      while (!stop) {
        const r = await fetch(pub + '/api/v1/db/query', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': key },
          body: JSON.stringify({ entity: 'items', action: 'insert', data: { v: 'x' } }),
        }).catch((e: Error) => e);
        if (r instanceof Error) failures.push(`public: ${r.message}`);
        else if (r.status !== 200) failures.push(`public ${r.status} ${await r.text()}`);
        else {
          await r.arrayBuffer();
          inserts++;
        }
      }
    };
    const mainLoop = async () => {
      while (!stop) {
        const r = await fetch(main + '/healthz').catch((e: Error) => e);
        if (r instanceof Error) failures.push(`main: ${r.message}`);
        else if (r.status !== 200) failures.push(`main ${r.status} ${await r.text()}`);
        else versions.add(((await r.json()) as { data: { version: string } }).data.version);
      }
    };
    const load = Promise.all([...Array.from({ length: 4 }, publicLoop), ...Array.from({ length: 4 }, mainLoop)]);
    await Bun.sleep(1000);
    const neu = serve(join(dir, 'basalt-next'), dir, env);
    procs.push(neu);
    expect(await old.proc.exited).toBe(0);
    const before = inserts;
    await eventually(() => inserts > before + 10, { timeout: 30_000, what: 'inserts on the new process' });
    stop = true;
    await load;
    expect(failures).toEqual([]);
    expect(versions.has(NEXT_VERSION)).toBe(true);
    expect(versions.size).toBe(2);
    expect(logLines(await old.output(), 'handed over')[0]).toMatchObject({ refused: 0 });
  }, 240_000);
});
