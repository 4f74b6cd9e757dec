/**
 * An Idempotency-Key's life (docs/mail.md): the job holds it for 24 h, then the key is free and
 * the next request takes it over; purging the job frees it too. On the source only: the clock
 * is moved by rewriting the job's times in the database and the purge is run at once, in this
 * process. The rest of idempotency runs over HTTP against the executable: idempotency.test.ts.
 */
import { describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { mailSuite, waitState } from './helpers';
import { expectBError } from '../helpers/envelopes';

describe.each(ENGINES)('mail idempotency key expiry on %s', (engine) => {
  let s: TestServer;
  let key: string;
  const { send } = mailSuite(engine, {}, (m) => ({ s, key } = m));
  const msg = (subject: string) => ({ to: ['ada@example.com'], subject, text: 'body' });

  test('the job is the record: it holds its key for 24 h; then the key is free and the next request takes it over', async () => {
    const k = crypto.randomUUID();
    const first = await send(msg('ttl'), { 'Idempotency-Key': k });
    expect(first.status).toBe(202);
    const keyOf = async (id: string) =>
      (
        await s.platform.db.query<{ idem_key: string | null; hashed: boolean }>(
          'SELECT idem_key, idem_hash IS NOT NULL AS hashed FROM basalt.mail_jobs WHERE id = $1',
          [id],
        )
      ).rows[0];
    expect(await keyOf(first.body.data.job_id)).toEqual({ idem_key: k, hashed: true });
    // 23 h later the key still belongs to the first request: another payload is refused.
    await s.platform.db.query(`UPDATE basalt.mail_jobs SET created_at = now() - interval '23 hours' WHERE id = $1`, [
      first.body.data.job_id,
    ]);
    expectBError(await send(msg('ttl-2'), { 'Idempotency-Key': k }), 422, 'idempotency_key_reused');
    await s.platform.db.query(
      `UPDATE basalt.mail_jobs SET created_at = now() - interval '24 hours 1 second' WHERE id = $1`,
      [first.body.data.job_id],
    );
    // An expired key is free again: the same key with another payload is a new request.
    const fresh = await send(msg('ttl-2'), { 'Idempotency-Key': k });
    expect(fresh.status).toBe(202);
    expect(fresh.headers.get('idempotent-replayed')).toBeNull();
    expect(fresh.body.data.job_id).not.toBe(first.body.data.job_id);
    // The key moved to the new job: the retry replays its answer, not the expired one.
    expect(await keyOf(first.body.data.job_id)).toEqual({ idem_key: null, hashed: false });
    expect(await keyOf(fresh.body.data.job_id)).toEqual({ idem_key: k, hashed: true });
    const again = await send(msg('ttl-2'), { 'Idempotency-Key': k });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.data).toEqual(fresh.body.data);
    // Purging the finished job takes its key with it; the key is free then too.
    await waitState(s, key, fresh.body.data.job_id, 'sent');
    await s.platform.db.query(`UPDATE basalt.mail_jobs SET updated_at = now() - interval '400 days' WHERE id = $1`, [
      fresh.body.data.job_id,
    ]);
    expect((await s.platform.services.mail.jobs.purge())!.jobs).toBeGreaterThanOrEqual(1);
    const third = await send(msg('ttl-3'), { 'Idempotency-Key': k });
    expect(third.status).toBe(202);
    expect(third.headers.get('idempotent-replayed')).toBeNull();
  });
});
