/**
 * Durability of the queue: a `basalt serve` process killed with SIGKILL after it
 * accepted N jobs (some of them mid-send) loses none of them; after a restart on the
 * same data dir / database every job is delivered exactly once. And two instances
 * on one external database share the queue without sending anything twice. Runs against
 * the executable (scripts/test.ts): the killed process is then the compiled `basalt serve`.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { startServer } from '../helpers/server';
import { serveProcess, type ServedProcess } from '../helpers/serve-process';
import { createKey } from '../helpers/keys';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { openBasalt } from '../../src/services';
import { FROM } from './helpers';
import { eventually } from '../helpers/wait';

type Child = ServedProcess;
const serve = serveProcess;

async function post(child: Child, key: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${child.url}/api/v1/mail/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

async function jobState(child: Child, key: string, id: string): Promise<string | undefined> {
  const res = await fetch(`${child.url}/api/v1/mail/jobs/${id}`, { headers: { 'x-api-key': key } });
  return ((await res.json()) as any).data?.state;
}

/** A service key created directly in the database, before any server runs. */
async function makeKey(db: FreshDb): Promise<string> {
  const p = await openBasalt({ env: { ...db.env, BASALT_LOG_LEVEL: 'silent' }, migrate: true });
  try {
    return (await p.services.keys.create({ type: 'service', service: 'crash-test', permissions: ['mail:send'] })).key;
  } finally {
    await p.shutdown();
  }
}

describe.each(ENGINES)('mail queue survives SIGKILL on %s', (engine) => {
  const N = 12;
  let db: FreshDb;
  let sink: SmtpSink;
  const children: Child[] = [];
  afterAll(async () => {
    for (const c of children) c.proc.kill('SIGKILL');
    await Promise.all(children.map((c) => c.proc.exited));
    await sink?.close();
    await db?.drop();
  });

  test(`${N} accepted jobs, process killed mid-send, restarted → all ${N} delivered exactly once`, async () => {
    db = await freshDb(engine);
    sink = await startSmtpSink();
    const key = await makeKey(db);
    const env = {
      BASALT_MAIL_SMTP_URL: sink.url,
      BASALT_MAIL_FROM: FROM,
      BASALT_MAIL_LEASE_MS: '2000',
      BASALT_MAIL_RETRY_BASE_MS: '50',
      BASALT_MAIL_CONCURRENCY: '3',
    };

    // The server holds every message unanswered: the first process dies with sends in flight.
    sink.hold();
    const first = await serve(db, env);
    children.push(first);
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const r = await post(
        first,
        key,
        { to: [`user${i}@example.com`], subject: `durable ${i}`, text: `message ${i}` },
        { 'Idempotency-Key': crypto.randomUUID() },
      );
      expect(r.status).toBe(202);
      ids.push(r.body.data.job_id);
    }
    await eventually(() => sink.heldCount, { until: (n) => n === 3, what: 'three messages held by the SMTP server' });
    // Those three, and any job claimed one round ahead (docs/mail.md, "Concurrency"), are
    // `sending`: at least the three in flight, at most concurrency plus one round.
    // How many were claimed ahead depends on how the posts and the worker interleave.
    const states = await Promise.all(ids.map((id) => jobState(first, key, id)));
    const sending = states.filter((s) => s === 'sending').length;
    expect(sending).toBeGreaterThanOrEqual(3);
    expect(sending).toBeLessThanOrEqual(6);
    expect(states.filter((s) => s !== 'sending' && s !== 'queued')).toEqual([]);
    first.proc.kill('SIGKILL');
    await first.proc.exited;
    await eventually(() => sink.heldCount, { until: (n) => n === 0, what: 'the killed sender to disconnect' });
    sink.release();
    expect(sink.messages).toHaveLength(0);

    // Same data dir / database: the embedded lock of the dead process is taken over.
    const second = await serve(db, env);
    children.push(second);
    // Recovery bound, from the moment the restarted instance answers (its start-up is no part of it,
    // and takes tens of seconds on a loaded machine): every orphan sent within the lease (2 s here)
    // plus the sends themselves.
    const restartedAt = performance.now();
    await sink.waitFor(N, 20_000);
    expect(performance.now() - restartedAt).toBeLessThan(15_000);
    await Bun.sleep(300);
    const byId = new Map<string, number>();
    for (const m of sink.messages) byId.set(m.messageId, (byId.get(m.messageId) ?? 0) + 1);
    expect(ids.map((id) => byId.get(`<${id}@example.com>`) ?? 0)).toEqual(ids.map(() => 1));
    expect(sink.messages.map((m) => m.subject).sort()).toEqual(ids.map((_, i) => `durable ${i}`).sort());
    for (const id of ids) expect(await jobState(second, key, id)).toBe('sent');
    second.proc.kill('SIGTERM');
    expect(await second.proc.exited).toBe(0);
  }, 90_000);
});

describe.skipIf(!ENGINES.includes('external'))('crash recovery with the default lease', () => {
  test('jobs held by an instance killed with SIGKILL are delivered by a survivor within 15 s, once each', async () => {
    const db = await freshDb('external');
    const sink = await startSmtpSink();
    // No BASALT_MAIL_LEASE_MS: the default lease (docs/mail.md) is what is under test.
    const env = { BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: FROM, BASALT_MAIL_CONCURRENCY: '3' };
    let survivor: Awaited<ReturnType<typeof startServer>> | undefined;
    let dying: Child | undefined;
    try {
      const key = await makeKey(db);
      sink.hold();
      dying = await serve(db, env);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await post(dying, key, { to: [`crash${i}@example.com`], subject: `recover ${i}`, text: 'x' });
        expect(r.status).toBe(202);
        ids.push(r.body.data.job_id);
      }
      await eventually(() => sink.heldCount, { until: (n) => n === 3, what: 'three messages held by the SMTP server' });
      // The survivor starts while the doomed instance holds (and renews) every job, so it can take none yet.
      survivor = await startServer('external', { db, env });
      await Bun.sleep(500);
      expect(sink.messages).toHaveLength(0);
      dying.proc.kill('SIGKILL');
      await dying.proc.exited;
      const killedAt = performance.now();
      await eventually(() => sink.heldCount, { until: (n) => n === 0, what: 'the killed sender to disconnect' });
      sink.release();
      await sink.waitFor(3, 15_000);
      const recovery = performance.now() - killedAt;
      expect(recovery).toBeLessThan(15_000);
      await Bun.sleep(300);
      const counts = new Map<string, number>();
      for (const m of sink.messages) counts.set(m.messageId, (counts.get(m.messageId) ?? 0) + 1);
      expect(ids.map((id) => counts.get(`<${id}@example.com>`) ?? 0)).toEqual([1, 1, 1]);
      const rows = await survivor.sql<{ state: string }>('SELECT state FROM basalt.mail_jobs ORDER BY created_at');
      expect(rows.map((r) => r.state)).toEqual(['sent', 'sent', 'sent']);
    } finally {
      dying?.proc.kill('SIGKILL');
      await survivor?.stop();
      await sink.close();
      await db.drop();
    }
  }, 60_000);
});

describe.skipIf(!ENGINES.includes('external'))('two instances on one external database', () => {
  test('share one queue: both send, every job delivered exactly once', async () => {
    const sink = await startSmtpSink();
    const env = { BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: FROM, BASALT_MAIL_CONCURRENCY: '2' };
    const a = await startServer('external', { env });
    const b = await startServer('external', { db: a.db, env });
    try {
      const key = await createKey(a, { type: 'service', service: 'scale', permissions: ['mail:send'] });
      sink.hold();
      const ids: string[] = [];
      for (let i = 0; i < 30; i++) {
        const s = i % 2 ? a : b;
        const r = await s.req('POST', '/api/v1/mail/send', {
          body: { to: ['ada@example.com'], subject: `shared ${i}`, text: 'x' },
          headers: { 'x-api-key': key },
        });
        expect(r.status).toBe(202);
        ids.push(r.body.data.job_id);
      }
      // Each instance sends at most 2 at once, so 4 in flight means both are working.
      const claimers = await eventually(
        async () =>
          await a.sql<{ claimed_by: string }>(
            "SELECT DISTINCT claimed_by FROM basalt.mail_jobs WHERE state = 'sending'",
          ),
        { until: (r) => r.length === 2, what: 'both instances to claim jobs' },
      );
      expect(claimers).toHaveLength(2);
      sink.release();
      await sink.waitFor(30, 20_000);
      await Bun.sleep(300);
      const counts = new Map<string, number>();
      for (const m of sink.messages) counts.set(m.messageId, (counts.get(m.messageId) ?? 0) + 1);
      expect(ids.map((id) => counts.get(`<${id}@example.com>`) ?? 0)).toEqual(ids.map(() => 1));
      const rows = await a.sql<{ claimed_by: string; n: string }>(
        "SELECT claimed_by, count(*) AS n FROM basalt.mail_jobs WHERE state = 'sent' GROUP BY claimed_by",
      );
      expect(rows.length).toBe(2);
    } finally {
      await b.stop();
      await a.stop();
      await sink.close();
    }
  }, 60_000);
});
