/**
 * Shutdown against a slow SMTP server: a send the server accepts within the grace is
 * recorded sent, one still unanswered is aborted and given back, never delivered twice.
 * On the source only: the mail service is made in this process with a grace of its own.
 * A send longer than the lease (heartbeat) runs over HTTP against the executable:
 * delivery.test.ts.
 */
import { describe, expect, test } from 'bun:test';
import { ENGINES, type FreshDb } from '../helpers/engines';
import type { SmtpSink } from '../helpers/smtp-sink';
import { openBasalt, type Basalt } from '../../src/services';
import { createMailService } from '../../src/modules/mail/service';
import { FROM, arrived, sinkAndDb } from './helpers';
import { eventually } from '../helpers/wait';

describe.each(ENGINES)('mail shutdown on %s', (engine) => {
  let db: FreshDb;
  let sink: SmtpSink;
  const open = (extra: Record<string, string> = {}) =>
    openBasalt({
      env: {
        ...db.env,
        BASALT_LOG_LEVEL: 'silent',
        BASALT_MAIL_SMTP_URL: sink.url,
        BASALT_MAIL_FROM: FROM,
        BASALT_MAIL_CONCURRENCY: '2',
        ...extra,
      },
      migrate: true,
    });
  const row = async (p: Basalt, id: string) =>
    (
      await p.db.query<{ state: string; attempts: number; claimed_by: string | null }>(
        'SELECT state, attempts, claimed_by FROM basalt.mail_jobs WHERE id = $1',
        [id],
      )
    ).rows[0];

  sinkAndDb(engine, (d, k) => {
    db = d;
    sink = k;
  });

  test('accepted within the grace → sent; still unanswered → aborted and given back, delivered once after restart', async () => {
    const p = await open();
    const mail = createMailService(p, { shutdownGraceMs: 2500 });
    await mail.startWorker();
    // A: the server answers after 1.2 s (inside the grace). B: the server never answers.
    sink.delay(1200);
    const a = await mail.enqueue({ to: ['ada@example.com'], subject: 'inside grace', text: 'x' });
    await eventually(() => sink.heldCount, { until: (n) => n === 1, what: 'A at the server' });
    sink.hold();
    const b = await mail.enqueue({ to: ['bob@example.com'], subject: 'past grace', text: 'x' });
    await eventually(() => sink.heldCount, { until: (n) => n === 2, what: 'B at the server' });
    await p.shutdown();
    // B's connection was closed before the server answered: releasing it now delivers nothing.
    await eventually(() => sink.heldCount, {
      until: (n) => n === 0,
      what: 'the sink to see the aborted connection close',
      timeout: 3000,
    });
    sink.release();
    sink.delay(0);
    await Bun.sleep(200);
    expect(arrived(sink, a.jobId)).toHaveLength(1);
    expect(arrived(sink, b.jobId)).toHaveLength(0);

    const again = await open();
    try {
      expect(await row(again, a.jobId)).toMatchObject({ state: 'sent', attempts: 1 });
      // Given back as not attempted, so a restart (or another instance) sends it at once.
      expect(await row(again, b.jobId)).toEqual({ state: 'queued', attempts: 0, claimed_by: null });
      await again.services.mail.startWorker();
      await eventually(() => row(again, b.jobId), {
        until: (r) => r?.state === 'sent',
        what: 'B sent after the restart',
      });
      await Bun.sleep(200);
      expect(arrived(sink, a.jobId)).toHaveLength(1);
      expect(arrived(sink, b.jobId)).toHaveLength(1);
    } finally {
      await again.shutdown();
    }
  }, 30_000);
});
