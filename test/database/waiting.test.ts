/**
 * Waiting for the database is bounded and fair (docs/database.md, "Waiting for the
 * database"), on both engines. External PostgreSQL runs with database.pool_max = 2, so
 * one key may hold one connection of the Database API pool (db.pool_share_per_key 50 %)
 * and two keys fill it — the pool starvation case; the embedded engine has its one session.
 * The headline case (./waiting-scenario.ts) also runs on the compiled executable alone in
 * an empty directory (./waiting-binary.test.ts). Keys are made and revoked through the admin
 * API; the refusal when the platform's own work holds the database holds that work in
 * process (`ON_SOURCE`).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, startServer, type TestServer } from '../helpers/server';
import { signInAdmin } from '../helpers/admin';
import { createKey, listKeys } from '../helpers/keys';
import { signInUser } from '../helpers/users';
import { begin, counters, expectBounded, holdAndQueue, query, type WaitingTarget, WITHIN_MS } from './waiting-scenario';

const TABLE = 'CREATE TABLE public.marks (id serial PRIMARY KEY, who text NOT NULL)';

describe.each(ENGINES)('waiting for the database on %s', (engine) => {
  let s: TestServer;
  /** One administrator and one site user for the whole suite (sign-ins are rate limited). */
  let admin: Record<string, string>;
  let user: Record<string, string>;
  const newKey = async () => {
    const key = await createKey(s, {
      type: 'service',
      service: 'waiting',
      permissions: ['db:query'],
      tables: ['marks'],
    });
    const id = (await listKeys(s)).find((k) => key.startsWith(k.prefix) && key.endsWith(k.last4))!.id;
    return { id, key };
  };
  /** Revoke through the admin API, as the suite's administrator. */
  const revoke = async (id: string) => {
    const r = await fetch(`${s.url}/api/admin/keys/${id}/revoke`, { method: 'POST', headers: admin });
    expect(r.status).toBe(200);
  };
  let cleaner: string;
  const target = async (): Promise<WaitingTarget> => ({
    main: s.url,
    pub: s.publicUrl,
    holder: await newKey(),
    other: (await newKey()).key,
    admin,
    user,
  });
  const clear = async () => {
    const r = await s.req('POST', '/api/v1/db/query', {
      headers: { 'x-api-key': cleaner },
      body: { entity: 'marks', action: 'delete', filters: [{ field: 'id', op: 'gt', value: 0 }] },
    });
    expect(r.status).toBe(200);
  };

  beforeAll(async () => {
    s = await startServer(engine, {
      env: engine === 'external' ? { BASALT_DATABASE_POOL_MAX: '2' } : {},
      migrations: { '001_marks.sql': TABLE },
    });
    admin = (await signInAdmin(s)).headers();
    cleaner = (await newKey()).key;
    user = (await signInUser(s)).headers();
  }, 180_000);
  afterAll(() => s.stop());

  test('one key holds a transaction and queues begins: session checks, another key and the revocation are not held up', async () => {
    await clear();
    const measured = await holdAndQueue(await target());
    console.log(`waiting for the database, in process on ${engine}:`, JSON.stringify(measured));
  }, 30_000);

  test('queued begins count toward the per-key cap: the next begin answers 429 at once', async () => {
    await s.settings.set('db.max_transactions_per_key', 3);
    try {
      const t = await target();
      const held = await begin(t, t.holder.key);
      expect(held.status).toBe(200);
      // Two begins wait behind the key's open transaction (embedded: the session; external: its share).
      const queued = [begin(t, t.holder.key), begin(t, t.holder.key)];
      await Bun.sleep(300);
      const refused = await begin(t, t.holder.key);
      expect(refused.status).toBe(429);
      expect(refused.code).toBe('too_many_transactions');
      expect(refused.ms).toBeLessThan(1000);
      // The key's own begins never take its transaction's place: they are refused in time.
      for (const a of await Promise.all(queued)) {
        expectBounded(a, 'a queued begin');
        expect(a.status).toBe(503);
      }
      await revoke(t.holder.id);
    } finally {
      await s.settings.set('db.max_transactions_per_key', 10);
    }
  }, 30_000);

  test("an idle transaction gives the database back when another key has waited; its id then says so (409, reason 'preempted')", async () => {
    await clear();
    const t = await target();
    const second = await newKey();
    // Fill what two keys may hold: embedded, the session (the second begin takes it over);
    // external, the two connections of the pool.
    const a = await begin(t, t.holder.key);
    expect(a.status).toBe(200);
    const aId = a.body.data.transaction_id;
    await query(t, t.holder.key, { action: 'insert', data: { who: 'a' }, transaction_id: aId });
    const b = await begin(t, second.key);
    expect(b.status).toBe(200);
    // A third key's select: served within the bound, by taking an idle transaction's place.
    const c = await query(t, t.other, { action: 'select' });
    expect(c.status).toBe(200);
    expect(c.ms).toBeLessThan(WITHIN_MS);
    expect(c.body.data.rows).toEqual([]);
    // One of the two transactions was rolled back; its key learns why on its next request.
    const answers = await Promise.all([
      query(t, t.holder.key, { action: 'select', transaction_id: aId }),
      query(t, second.key, { action: 'select', transaction_id: b.body.data.transaction_id }),
    ]);
    const preempted = answers.filter((r) => r.status === 409);
    expect(preempted.length).toBeGreaterThanOrEqual(1);
    for (const r of preempted) {
      expect(r.code).toBe('transaction_aborted');
      expect(r.body.error.details).toEqual({ reason: 'preempted' });
    }
    expect((await counters(t)).basalt_db_transactions_preempted_total).toBeGreaterThan(0);
    await revoke(t.holder.id);
    await revoke(second.id);
  }, 30_000);

  test('a transaction lives at most db.transaction_max_lifetime_ms, however busy (409, reason lifetime)', async () => {
    await clear();
    await s.settings.set('db.transaction_max_lifetime_ms', 1000);
    try {
      const k = await newKey();
      const t = { ...(await target()), holder: k };
      const r = await begin(t, k.key);
      const id = r.body.data.transaction_id;
      const t0 = performance.now();
      let last = await query(t, k.key, { action: 'insert', data: { who: 'busy' }, transaction_id: id });
      // Busy all along: a statement every 100 ms, so the idle timeout never fires.
      while (last.status === 200 && performance.now() - t0 < 5000) {
        await Bun.sleep(100);
        last = await query(t, k.key, { action: 'select', transaction_id: id });
      }
      expect([last.status, last.code]).toEqual([409, 'transaction_aborted']);
      expect(last.body.error.details).toEqual({ reason: 'lifetime' });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(900);
      expect(performance.now() - t0).toBeLessThan(4000);
      expect((await query(t, t.other, { action: 'select' })).body.data.rows).toEqual([]);
    } finally {
      await s.settings.set('db.transaction_max_lifetime_ms', 60_000);
    }
  }, 30_000);

  test('revoking a key answers in well under a second while another key holds the database', async () => {
    const t = await target();
    const victim = await newKey();
    const held = await begin(t, t.holder.key);
    expect(held.status).toBe(200);
    const t0 = performance.now();
    const r = await fetch(`${s.url}/api/admin/keys/${victim.id}/revoke`, { method: 'POST', headers: t.admin });
    expect(r.status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect((await query(t, victim.key, { action: 'select' })).status).toBe(401);
    await revoke(t.holder.id);
  }, 30_000);

  // The platform's own work holding the database is held in this process: on the source only.
  test.if(ON_SOURCE)(
    'a wait past database.busy_timeout_ms answers 503 database_busy with Retry-After in every area envelope',
    async () => {
      // Work nothing may take the place of: the platform's own transaction holds the database.
      await s.settings.set('database.busy_timeout_ms', 500);
      const k = await newKey();
      const k2 = await newKey();
      let release!: () => void;
      const hold = new Promise<void>((r) => (release = r));
      // Every connection of the platform's pool (external) or the session (embedded).
      const slots = engine === 'external' ? 2 : 1;
      const holders = Array.from({ length: slots }, () => s.platform.db.transaction(() => hold));
      try {
        await Bun.sleep(100);
        // Format A (admin API: the session lookup waits).
        const me = await s.req('GET', '/api/admin/auth/me', { headers: admin });
        expect(me.status).toBe(503);
        expect(me.body).toMatchObject({ success: false, error: { code: 'database_busy', retry_after: 1 } });
        expect(me.headers.get('retry-after')).toBe('1');
        // Format C (files: the new key's check waits).
        const files = await s.req('GET', '/api/v1/files', { headers: { 'x-api-key': k.key } });
        expect(files.status).toBe(503);
        expect(files.body).toMatchObject({ success: false, code: 'database_busy' });
        expect(files.headers.get('retry-after')).toBe('1');
        // Format B (mail: the same).
        const mail = await s.req('POST', '/api/v1/mail/send', {
          headers: { 'x-api-key': k2.key },
          body: { to: 'a@example.com', subject: 's', text: 't' },
        });
        expect(mail.status).toBe(503);
        // Format B: the code in errors[0].
        expect(mail.body.errors[0].code).toBe('database_busy');
        expect(mail.headers.get('retry-after')).toBe('1');
      } finally {
        release();
        await Promise.all(holders);
        await s.settings.set('database.busy_timeout_ms', 2000);
      }
    },
    30_000,
  );
});
