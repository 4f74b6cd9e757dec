/**
 * How workers learn about new jobs (docs/mail.md):
 * NOTIFY wakes another instance at once (its poll stretched to a minute, so only the
 * notification can explain a prompt delivery); without LISTEN the poll still delivers:
 * workers of their own on platforms opened in this process (on the source only). Two
 * serving instances sharing the queue run against the executable too: two-instances.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { openBasalt, type Basalt } from '../../src/services';
import { MailWorker } from '../../src/modules/mail/worker';
import { SmtpTransport } from '../../src/modules/mail/smtp';
import type { Db } from '../../src/db/engine';
import { FROM, arrived } from './helpers';
import { eventually } from '../helpers/wait';

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
});
