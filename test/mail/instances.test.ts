/**
 * How workers learn about new jobs, and what several instances on one database do:
 * NOTIFY wakes another instance at once (its poll stretched to a minute, so only the
 * notification can explain a prompt delivery); without LISTEN the poll still delivers;
 * the same idempotency key sent to two instances at once makes one job; a slow server
 * with a short lease and two instances still delivers every job once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { openBasalt, type Basalt } from '../../src/services';
import { MailWorker } from '../../src/modules/mail/worker';
import { SmtpTransport } from '../../src/modules/mail/smtp';
import type { Db } from '../../src/db/engine';
import { FROM, arrived } from './helpers';
import { eventually } from '../helpers/wait';
import { expectBError } from '../helpers/envelopes';

/** A worker of its own on `p` (the platform's own worker only starts with HTTP). */
function worker(p: Basalt, opts: { pollMs: number; db?: Db }) {
  const smtp = new SmtpTransport(p.settings, p.log);
  const w = new MailWorker({ db: opts.db ?? p.db, settings: p.settings, log: p.log, smtp, pollMs: opts.pollMs });
  return {
    w,
    start: () => w.start(),
    stop: async () => {
      await w.stop();
      smtp.close();
    },
  };
}

/** `db` whose LISTEN fails (a pooler in transaction mode, a role without the right): everything else is the real database. */
function withoutListen(db: Db): Db {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === 'listen') return async () => Promise.reject(new Error('LISTEN is not supported here'));
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

const msg = (subject: string) => ({ to: ['ada@example.com'], subject, text: 'x' });

describe.each(ENGINES)('mail without LISTEN on %s', (engine) => {
  let db: FreshDb;
  let sink: SmtpSink;
  let p: Basalt;
  beforeAll(async () => {
    db = await freshDb(engine);
    sink = await startSmtpSink();
    p = await openBasalt({
      env: { ...db.env, BASALT_LOG_LEVEL: 'silent', BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: FROM },
      migrate: true,
    });
  });
  afterAll(async () => {
    await p.shutdown();
    await sink.close();
    await db.drop();
  });

  test('LISTEN fails → the worker still starts and the poll delivers; with a one-minute poll nothing else would', async () => {
    // Control: no LISTEN and a one-minute poll. Only the start-up look finds work; a job queued after it waits.
    const idle = worker(p, { pollMs: 60_000, db: withoutListen(p.db) });
    await idle.start();
    await Bun.sleep(300); // let the start-up look finish, so it cannot be what finds the job
    const a = await p.services.mail.enqueue(msg('no listen, slow poll'));
    await Bun.sleep(1500);
    expect(arrived(sink, a.jobId)).toHaveLength(0);
    await idle.stop();

    const polling = worker(p, { pollMs: 200, db: withoutListen(p.db) });
    await polling.start();
    try {
      const b = await p.services.mail.enqueue(msg('no listen, fast poll'));
      await sink.waitFor(2, 5000);
      expect(arrived(sink, a.jobId)).toHaveLength(1);
      expect(arrived(sink, b.jobId)).toHaveLength(1);
    } finally {
      await polling.stop();
    }
  }, 20_000);
});

describe.skipIf(!ENGINES.includes('external'))('mail on two instances of one external database', () => {
  let db: FreshDb;
  let sink: SmtpSink;
  beforeAll(async () => {
    db = await freshDb('external');
    sink = await startSmtpSink();
  });
  afterAll(async () => {
    await sink.close();
    await db.drop();
  });

  test('NOTIFY: A queues (no worker), B (poll: 1 min) delivers within a second or two', async () => {
    const env = { ...db.env, BASALT_LOG_LEVEL: 'silent', BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: FROM };
    const a = await openBasalt({ env, migrate: true });
    const b = await openBasalt({ env, migrate: false });
    const wb = worker(b, { pollMs: 60_000 });
    try {
      await wb.start(); // resolves once LISTEN is in place
      await Bun.sleep(300); // and the start-up look has found nothing
      for (let i = 0; i < 3; i++) {
        const t0 = Date.now();
        const { jobId } = await a.services.mail.enqueue(msg(`notify ${i}`));
        await eventually(() => arrived(sink, jobId).length, {
          until: (n) => n === 1,
          what: `job ${i} delivered by B`,
          timeout: 5000,
        });
        expect(Date.now() - t0).toBeLessThan(3000);
        const row = (
          await a.db.query<{ state: string; claimed_by: string }>(
            'SELECT state, claimed_by FROM basalt.mail_jobs WHERE id = $1',
            [jobId],
          )
        ).rows[0]!;
        expect(row.claimed_by).toBe(wb.w.id);
        await Bun.sleep(100); // B sits idle between jobs: the next one needs a fresh notification
      }
    } finally {
      await wb.stop();
      await b.shutdown();
      await a.shutdown();
    }
  }, 30_000);

  describe('two serving instances', () => {
    let a: TestServer;
    let b: TestServer;
    let key: string;
    const send = (s: TestServer, body: unknown, headers: Record<string, string> = {}) =>
      s.req('POST', '/api/v1/mail/send', { body, headers: { 'x-api-key': key, ...headers } });
    beforeAll(async () => {
      const env = {
        BASALT_MAIL_SMTP_URL: sink.url,
        BASALT_MAIL_FROM: FROM,
        BASALT_MAIL_LEASE_MS: '1000',
        BASALT_MAIL_CONCURRENCY: '2',
      };
      a = await startServer('external', { db, env });
      b = await startServer('external', { db, env });
      key = (await a.platform.services.keys.create({ type: 'service', service: 'pair', permissions: ['mail:send'] }))
        .key;
    });
    afterAll(async () => {
      await b?.stop();
      await a?.stop();
    });

    test('the same Idempotency-Key at A and B at once → one job, one delivery, the other replays or gets 409', async () => {
      for (const sync of [false, true]) {
        for (let round = 0; round < 5; round++) {
          const k = crypto.randomUUID();
          const subject = `pair ${sync} ${round}`;
          const rs = await Promise.all([a, b].map((s) => send(s, { ...msg(subject), sync }, { 'Idempotency-Key': k })));
          const ok = sync ? 200 : 202;
          expect(rs.every((r) => r.status === ok || r.status === 409)).toBe(true);
          for (const r of rs.filter((r) => r.status === 409)) expectBError(r, 409, 'idempotency_key_in_progress');
          const answered = rs.filter((r) => r.status === ok);
          expect(answered.filter((r) => r.headers.get('idempotent-replayed') !== 'true')).toHaveLength(1);
          expect(new Set(answered.map((r) => r.body.data.job_id)).size).toBe(1);
          const { rows } = await a.platform.db.query<{ id: string }>(
            'SELECT id FROM basalt.mail_jobs WHERE subject = $1',
            [subject],
          );
          expect(rows).toHaveLength(1);
          await eventually(() => arrived(sink, rows[0]!.id).length, {
            until: (n) => n >= 1,
            what: `${subject} delivered`,
          });
        }
      }
      await Bun.sleep(300);
      const pairs = sink.messages.filter((m) => m.subject.startsWith('pair '));
      expect(pairs).toHaveLength(10);
      expect(new Set(pairs.map((m) => m.messageId)).size).toBe(10);
    }, 30_000);

    test('a server slower than the 1 s lease, both instances polling → every job delivered exactly once', async () => {
      sink.delay(3000);
      try {
        const ids: string[] = [];
        for (let i = 0; i < 6; i++) ids.push((await send(i % 2 ? a : b, msg(`slow pair ${i}`))).body.data.job_id);
        await eventually(
          async () =>
            (
              await a.platform.db.query<{ n: string }>(
                "SELECT count(*) AS n FROM basalt.mail_jobs WHERE state = 'sent' AND id = ANY($1::uuid[])",
                [ids],
              )
            ).rows[0]!.n,
          { until: (n) => n === '6', what: 'all six sent', timeout: 30_000 },
        );
        await Bun.sleep(1500);
        expect(ids.map((id) => arrived(sink, id).length)).toEqual(ids.map(() => 1));
        const { rows } = await a.platform.db.query<{ attempts: number }>(
          'SELECT attempts FROM basalt.mail_jobs WHERE id = ANY($1::uuid[])',
          [ids],
        );
        expect(rows.map((r) => r.attempts)).toEqual(ids.map(() => 1));
      } finally {
        sink.delay(0);
      }
    }, 45_000);
  });
});
