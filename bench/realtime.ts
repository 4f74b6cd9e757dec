/**
 * Realtime under per-user policies (docs/realtime.md, "Performance"): USERS signed-in users ×
 * STREAMS streams each follow `notes` (policy `owner_id = basalt.uid()`), while RATE changes
 * per second are committed for SECONDS through the Database API (inserts 60 %, updates 30 %,
 * deletes 10 %, of random users' rows). The server runs as its own process (`bun src/main.ts
 * serve`), the streams and the writer in this one.
 *
 * Checked: every change reaches exactly the streams allowed to see it, exactly once (an
 * insert, update or delete: the 10 streams of its owner, as a delete goes only to those who
 * could see the row), and nothing else arrives. Measured: commit-to-
 * delivery latency from the moment the write request was sent (it includes the write
 * itself: an upper bound) and from its answer (the commit came before: a lower bound), the
 * server's CPU per 1,000 delivered events (writes included), its RSS at the end.
 *
 *   npm run bench:realtime                                  # embedded, the spec's sizes
 *   BENCH_USERS=10 BENCH_SECONDS=10 bun bench/realtime.ts    # a short sanity run
 *   BASALT_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:realtime   # both engines
 * (npm run sets BUN_CONFIG_MAX_HTTP_REQUESTS: 500 streams are more than Bun's fetch opens at once by default.)
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createParser } from 'eventsource-parser';
import { ENGINES } from '../test/helpers/engines';
import { benchDb, cpuSeconds, fmt, freePort, median, p99, printTable, rssMiB, waitFor } from './support';

const USERS = Number(process.env.BENCH_USERS ?? 50);
const STREAMS = Number(process.env.BENCH_STREAMS_PER_USER ?? 10);
// Bun's fetch opens at most BUN_CONFIG_MAX_HTTP_REQUESTS (256) requests at once and queues
// the rest without a word: 500 open streams need more (npm run bench:realtime sets 4096).
const FETCH_MAX = Number(process.env.BUN_CONFIG_MAX_HTTP_REQUESTS ?? 256);
if (USERS * STREAMS + 16 > FETCH_MAX)
  throw new Error(
    `${USERS * STREAMS} streams need BUN_CONFIG_MAX_HTTP_REQUESTS above ${USERS * STREAMS + 16} (have ${FETCH_MAX}): run npm run bench:realtime`,
  );
const RATE = Number(process.env.BENCH_RATE ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
const ROOT = join(import.meta.dir, '..');

const SCHEMA = `
CREATE TABLE notes (id bigserial PRIMARY KEY, owner_id uuid NOT NULL, body text NOT NULL);
CREATE INDEX notes_owner ON notes (owner_id);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON notes TO basalt_user;
CREATE POLICY own ON notes FOR SELECT TO basalt_user USING (owner_id = basalt.uid());
SELECT basalt.realtime_enable('notes');`;

interface Change {
  /** When the write request was sent, and when its answer came (the commit lies between). */
  at: number;
  answered: number;
  action: 'insert' | 'update' | 'delete';
  owner: number;
  /** insert/update: the body written; delete: the row id. */
  mark: string;
}

async function run(engine: 'embedded' | 'external') {
  const db = await benchDb(engine);
  if (!db) return undefined;
  const migrations = join(db.dataDir, 'migrations');
  mkdirSync(migrations, { recursive: true });
  writeFileSync(join(migrations, '001_notes.sql'), SCHEMA);
  const port = await freePort();
  const env = {
    ...process.env,
    ...db.env,
    BASALT_MIGRATIONS_DIR: migrations,
    BASALT_WEB_PORT: String(port),
    BASALT_LOG_LEVEL: 'warn',
    BASALT_AUTH_RATE_LIMIT_REGISTER_PER_IP: '100000',
    BASALT_AUTH_RATE_LIMIT_LOGIN_PER_IP: '100000',
  };
  const cli = (args: string[]) =>
    Bun.spawnSync([process.execPath, join(ROOT, 'src/main.ts'), ...args], { env, cwd: db.dataDir });
  cli(['migrate']);
  const made = cli([
    'keys',
    'create',
    '--type',
    'service',
    '--service',
    'bench',
    '--permissions',
    'db:query',
    '--tables',
    'notes',
    '--json',
  ]);
  const key = JSON.parse(made.stdout.toString()).key as string;
  const server = Bun.spawn([process.execPath, join(ROOT, 'src/main.ts'), 'serve'], {
    env,
    cwd: db.dataDir,
    stdout: 'ignore',
    stderr: 'inherit',
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor(`${url}/healthz`, server, 'basalt serve', 60_000);
    // Users and their tokens.
    const users: { id: string; token: string }[] = [];
    for (let i = 0; i < USERS; i++) {
      const email = `rt-bench-${i}-${Date.now().toString(36)}@example.com`;
      const body = JSON.stringify({ email, password: 'correct horse battery' });
      const headers = { 'content-type': 'application/json' };
      await fetch(`${url}/api/v1/auth/register`, { method: 'POST', headers, body });
      const login = await (await fetch(`${url}/api/v1/auth/login`, { method: 'POST', headers, body })).json();
      users.push({ id: login.data.user.id, token: login.data.access_token });
    }
    // The streams: what each received, keyed by change mark, with arrival times.
    const received: { owner: number; got: Map<string, number[]> }[] = [];
    const aborts: AbortController[] = [];
    let unexpected = 0;
    for (let u = 0; u < USERS; u++)
      for (let k = 0; k < STREAMS; k++) {
        const ctl = new AbortController();
        aborts.push(ctl);
        const res = await fetch(`${url}/api/v1/realtime?tables=notes`, {
          headers: { authorization: `Bearer ${users[u]!.token}` },
          signal: ctl.signal,
        });
        if (res.status !== 200) throw new Error(`stream refused: ${res.status} ${await res.text()}`);
        const mine = { owner: u, got: new Map<string, number[]>() };
        received.push(mine);
        const parser = createParser({
          onEvent: (m) => {
            if (m.event !== 'change') return;
            const d = JSON.parse(m.data);
            const mark = d.action === 'delete' ? `delete:${d.row.id}` : `${d.action}:${d.row.body}`;
            if (d.action !== 'delete' && d.row.owner_id !== users[u]!.id) unexpected++;
            const list = mine.got.get(mark) ?? [];
            list.push(performance.now());
            mine.got.set(mark, list);
          },
        });
        void (async () => {
          const dec = new TextDecoder();
          try {
            for await (const chunk of res.body!) parser.feed(dec.decode(chunk as Uint8Array, { stream: true }));
          } catch {}
        })();
      }
    // The writer: RATE changes per second through the Database API.
    const rows: { id: string; owner: number }[] = [];
    const changes: Change[] = [];
    const write = async (n: number) => {
      const owner = Math.floor(Math.random() * USERS);
      const r = Math.random();
      const at = performance.now();
      const send = (body: unknown) =>
        fetch(`${url}/api/v1/db/query`, {
          method: 'POST',
          headers: { 'x-api-key': key, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }).then((x) => x.json());
      if (r < 0.6 || rows.length < 10) {
        const mark = `w${n}`;
        const a = await send({ entity: 'notes', action: 'insert', data: { owner_id: users[owner]!.id, body: mark } });
        rows.push({ id: a.data.rows[0].id, owner });
        changes.push({ at, answered: performance.now(), action: 'insert', owner, mark });
      } else if (r < 0.9) {
        const row = rows[Math.floor(Math.random() * rows.length)]!;
        const mark = `w${n}`;
        await send({
          entity: 'notes',
          action: 'update',
          data: { body: mark },
          filters: [{ field: 'id', op: 'eq', value: row.id }],
        });
        changes.push({ at, answered: performance.now(), action: 'update', owner: row.owner, mark });
      } else {
        const row = rows.splice(Math.floor(Math.random() * rows.length), 1)[0]!;
        await send({ entity: 'notes', action: 'delete', filters: [{ field: 'id', op: 'eq', value: row.id }] });
        changes.push({ at, answered: performance.now(), action: 'delete', owner: row.owner, mark: row.id });
      }
    };
    const cpu0 = cpuSeconds(server.pid);
    const start = performance.now();
    const total = RATE * SECONDS;
    const pending: Promise<void>[] = [];
    for (let n = 0; n < total; n++) {
      const due = start + (n * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      // Updates and deletes need the rows of earlier inserts: one write at a time, on schedule.
      pending.push(write(n));
      if (pending.length >= 4) await pending.shift();
    }
    await Promise.all(pending);
    await Bun.sleep(3000); // the last deliveries
    const cpu = cpuSeconds(server.pid) - cpu0;
    const rss = rssMiB(server.pid);
    for (const a of aborts) a.abort();

    let delivered = 0;
    let missing = 0;
    let duplicates = 0;
    const lat: number[] = [];
    const afterAnswer: number[] = [];
    const writes = changes.map((c) => c.answered - c.at);
    for (const c of changes) {
      const key = c.action === 'delete' ? `delete:${c.mark}` : `${c.action}:${c.mark}`;
      for (const s of received) {
        const times = s.got.get(key) ?? [];
        const allowed = s.owner === c.owner;
        if (!allowed) {
          if (times.length) unexpected += times.length;
          continue;
        }
        if (!times.length) missing++;
        if (times.length > 1) duplicates += times.length - 1;
        for (const t of times) {
          delivered++;
          lat.push(t - c.at);
          afterAnswer.push(t - c.answered);
        }
      }
    }
    return {
      engine,
      changes: changes.length,
      delivered,
      missing,
      duplicates,
      unexpected,
      p50: median(lat),
      p99: p99(lat),
      p99Answer: p99(afterAnswer),
      writeP50: median(writes),
      cpuPer1000: (cpu / Math.max(1, delivered)) * 1000,
      rss,
      elapsed: (performance.now() - start) / 1000,
    };
  } finally {
    server.kill('SIGTERM');
    await server.exited;
    await db.drop();
  }
}

console.log(
  `bench:realtime — ${USERS} users × ${STREAMS} streams, ${RATE} changes/s for ${SECONDS} s (inserts 60 %, updates 30 %, deletes 10 %)`,
);
const rows: string[][] = [
  [
    'engine',
    'changes',
    'delivered',
    'missing',
    'duplicates',
    'unexpected',
    'write p50 ms',
    'p50 ms',
    'p99 ms',
    'p99 ms after answer',
    'server CPU ms / 1000 events',
    'server RSS MiB',
  ],
];
for (const engine of ENGINES) {
  const r = await run(engine);
  if (!r) continue;
  rows.push([
    r.engine,
    fmt(r.changes),
    fmt(r.delivered),
    fmt(r.missing),
    fmt(r.duplicates),
    fmt(r.unexpected),
    r.writeP50.toFixed(1),
    r.p50.toFixed(1),
    r.p99.toFixed(1),
    r.p99Answer.toFixed(1),
    (r.cpuPer1000 * 1000).toFixed(0),
    fmt(r.rss),
  ]);
}
printTable(rows);
