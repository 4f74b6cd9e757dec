/**
 * Failover under load on external PostgreSQL (docs/operations.md, "When the database drops
 * connections"): while many Database API requests (a service key's and a signed-in user's) run
 * at once, a loop ends Basalt's backends with `pg_terminate_backend` several times, as a
 * failover, a restart or a pooler would. The process stays up, every answer is 200 or 503
 * database_unavailable (no 500, no connection cut), and once the loop stops requests succeed
 * again. On the executable only (scripts/test.ts, EXECUTABLE_SUITES): the process guard is
 * `basalt serve`'s own.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { ADMIN_URL } from '../helpers/engines';
import { type Reply, startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { signInUser, type SignedInUser, USER_PASSWORD, userEmail, userIp } from '../helpers/users';
import { expectA, expectAError } from '../helpers/envelopes';
import { eventually } from '../helpers/wait';
import { dbQuery, NOTES_MIGRATION } from './user-data.fixtures';

/** Rounds of the kill loop, the pause between two, and the bound of the whole loop. */
const KILL_ROUNDS = 30;
const KILL_PAUSE_MS = 100;
const KILL_LOOP_MS = 15_000;
/** Requests in flight at once while the loop runs. */
const CLIENTS = 12;

describe.skipIf(!ADMIN_URL)('failover under load (external PostgreSQL)', () => {
  let s: TestServer;
  let user: SignedInUser;
  let service: string;
  let admin: postgres.Sql;

  beforeAll(async () => {
    s = await startServer('external', {
      migrations: { '001_notes.sql': NOTES_MIGRATION },
      // Registrations from one address, as many as the load sends.
      env: { BASALT_AUTH_RATE_LIMIT_REGISTER_PER_IP: '100000' },
    });
    user = await signInUser(s);
    service = await createKey(s, { type: 'service', service: 'app', permissions: ['db:query'], tables: ['notes'] });
    admin = postgres(s.db.url, { max: 1, onnotice: () => {}, connection: { application_name: 'failover-test' } });
  }, 240_000);
  afterAll(async () => {
    await admin?.end();
    await s?.stop();
  });

  /**
   * One request of the mix: a user's insert or select, or a service key's select (the Database
   * API pool), and now and then a registration (a transaction of the platform pool).
   */
  const one = (i: number): Promise<Reply> => {
    if (i % 4 === 3)
      return s.req('POST', '/api/v1/auth/register', {
        body: { email: userEmail('failover'), password: USER_PASSWORD },
        headers: { 'x-forwarded-for': userIp() },
      });
    if (i % 2 === 0)
      return dbQuery(s, service, { entity: 'notes', action: 'select', fields: ['id', 'body'], limit: 5 });
    if (i % 3 === 0) return dbQuery(s, user, { entity: 'notes', action: 'insert', data: { body: `n${i}` } });
    return dbQuery(s, user, { entity: 'notes', action: 'select', fields: ['id', 'body'], limit: 5 });
  };
  const succeeded = (r: Reply) => r.status === 200 || (r.status === 201 && r.body?.data?.user !== undefined);

  test('backends ended while requests run: the process stays up, answers are 200 or 503 database_unavailable, then 200 again', async () => {
    for (let i = 0; i < 10; i++) expect(succeeded(await one(i))).toBe(true);
    // Basalt's own backends: the platform pool's and the Database API pool's (application_name basalt…).
    const kill = () =>
      admin`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND application_name LIKE 'basalt%' AND pid <> pg_backend_pid()`;
    let killing = true;
    let killed = 0;
    const loop = (async () => {
      const until = Date.now() + KILL_LOOP_MS;
      try {
        for (let round = 0; round < KILL_ROUNDS && Date.now() < until; round++) {
          killed += (await kill())[0]!.n;
          await Bun.sleep(KILL_PAUSE_MS);
        }
      } finally {
        killing = false;
      }
    })();
    const answers: { ok: boolean; status: number; code?: string; text: string }[] = [];
    const cut: string[] = [];
    let n = 0;
    const client = async () => {
      while (killing) {
        const i = n++;
        try {
          const r = await one(i);
          answers.push({ ok: succeeded(r), status: r.status, code: r.body?.error?.code, text: r.text });
        } catch (e) {
          // The connection was cut (or refused: the process is gone); one is enough to fail.
          cut.push(String(e));
          return;
        }
      }
    };
    await Promise.all([loop, ...Array.from({ length: CLIENTS }, client)]);

    // The loop ended backends, and the load met it: some answers were refusals.
    expect(killed).toBeGreaterThan(0);
    expect(cut).toEqual([]);
    const wrong = answers.filter((a) => !a.ok && !(a.status === 503 && a.code === 'database_unavailable'));
    expect(wrong.map((a) => `${a.status} ${a.text}`)).toEqual([]);
    expect(answers.filter((a) => a.ok).length).toBeGreaterThan(0);
    // The process is the one started, still serving. A connection ended by the last round may
    // answer one more refusal; then every kind of request succeeds again, and keeps succeeding.
    expect(() => process.kill(s.pid, 0)).not.toThrow();
    for (let i = 0; i < 4; i++)
      await eventually(async () => succeeded(await one(i)), { timeout: 10_000, what: `request kind ${i} to succeed` });
    for (let i = 0; i < 20; i++) {
      const r = await one(i);
      expect(succeeded(r), `${r.status} ${r.text}`).toBe(true);
    }
    const r = await dbQuery(s, service, { entity: 'notes', action: 'select', fields: ['id'], limit: 1 });
    expectA(r, 200);
    // An entity the key may not use still answers in the envelope: the process is whole, not just alive.
    expectAError(await dbQuery(s, service, { entity: 'posts', action: 'select' }), 403, 'forbidden');
  }, 120_000);
});
