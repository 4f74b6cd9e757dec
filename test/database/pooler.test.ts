/**
 * Behind a transaction-mode pooler (docs/operations.md, "Scaling out"): two instances on one
 * external database reached through Debian's PgBouncer in transaction mode
 * (test/helpers/pgbouncer.ts, set up as the docs tell an operator), with database.pooler =
 * transaction, once with database.direct_url (LISTEN past the pooler) and once without
 * (notifications polled). Users' own data and service keys, transactions, realtime, settings
 * and key revocation across the instances, and a mixed load at 32 connections in which every
 * answer is 200 and no user ever reads another's row.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { freshDb, type FreshDb } from '../helpers/engines';
import { HAS_PGBOUNCER, startPgBouncer, type PgBouncer } from '../helpers/pgbouncer';
import { startServer, type TestServer } from '../helpers/server';
import { createKey, revokeKey } from '../helpers/keys';
import { signInUser, type SignedInUser } from '../helpers/users';
import { expectA, expectAError } from '../helpers/envelopes';
import { eventually } from '../helpers/wait';
import { openSse } from '../realtime/sse';
import { dbQuery, dbTx, NOTES_MIGRATION, type Who } from './user-data.fixtures';

const MIGRATIONS = {
  '001_notes.sql': `${NOTES_MIGRATION}
SELECT basalt.realtime_enable('notes');
CREATE VIEW timeouts AS SELECT current_setting('statement_timeout') AS statement_timeout,
  current_setting('lock_timeout') AS lock_timeout, current_setting('application_name') AS application_name;
GRANT SELECT ON timeouts TO basalt_user;`,
};

describe.skipIf(!HAS_PGBOUNCER)('behind PgBouncer in transaction mode', () => {
  let bouncer: PgBouncer;
  beforeAll(async () => {
    bouncer = await startPgBouncer();
  });
  afterAll(async () => {
    await bouncer?.stop();
  });

  describe.each([
    ['with database.direct_url', true],
    ['without database.direct_url (polled)', false],
  ] as const)('%s', (_, direct) => {
    let db: FreshDb;
    let a: TestServer;
    let b: TestServer;
    let service: string;
    let users: SignedInUser[];

    beforeAll(async () => {
      db = await freshDb('external');
      const env = {
        BASALT_DATABASE_URL: bouncer.through(db.url),
        BASALT_DATABASE_POOLER: 'transaction',
        BASALT_DATABASE_POOL_MAX: '6',
        BASALT_WEB_TRUSTED_PROXIES: '127.0.0.1', // each user signs in from an address of its own (test/helpers/users.ts)
        ...(direct ? { BASALT_DATABASE_DIRECT_URL: db.url } : {}),
      };
      a = await startServer('external', { db, env, migrations: MIGRATIONS });
      b = await startServer('external', { db, env, migrations: MIGRATIONS });
      service = await createKey(a, {
        type: 'service',
        service: 'app',
        permissions: ['db:query'],
        tables: ['notes', 'timeouts'],
      });
      users = [];
      for (let i = 0; i < 6; i++) users.push(await signInUser(i % 2 ? b : a));
    }, 120_000);
    afterAll(async () => {
      await b?.stop();
      await a?.stop();
      await db?.drop();
    });

    const q = (s: TestServer, who: Who, body: Record<string, unknown>) => dbQuery(s, who, { entity: 'notes', ...body });

    test('the start-up lines say the pooler was found and where notifications come from', async () => {
      if (a.target !== 'executable') return; // the lines are `basalt serve`'s
      const line = await eventually(
        () =>
          a
            .output()
            .split('\n')
            .find((l) => l.includes('Pooler:')) ?? false,
        {
          what: 'the Pooler: start-up line',
        },
      );
      expect(line).toContain('transaction mode (PgBouncer');
      expect(line).toContain(
        direct ? 'LISTEN and migrations through database.direct_url' : 'notifications polled every 1 s',
      );
    });

    test('each user sees only their own rows, on either instance; a service key sees all', async () => {
      const [alice, bob] = users as [SignedInUser, SignedInUser];
      expectA(await q(a, alice, { action: 'insert', data: { body: 'alice 1' } }), 200);
      expectA(await q(b, bob, { action: 'insert', data: { body: 'bob 1' } }), 200);
      for (const s of [a, b]) {
        const mine = expectA(await q(s, alice, { action: 'select', fields: ['owner_id', 'body'] }), 200).rows;
        expect(mine).toEqual([{ owner_id: alice.user.id, body: 'alice 1' }]);
        const all = expectA(await q(s, service, { action: 'select', fields: ['body'], sort: [{ field: 'id' }] }), 200);
        expect(all.rows.map((r: { body: string }) => r.body)).toEqual(['alice 1', 'bob 1']);
      }
    });

    test("the Database API's timeouts hold in every transaction, though the pooler takes no such start-up parameter", async () => {
      for (const who of [service, users[0]!]) {
        const [row] = expectA(await dbQuery(a, who, { entity: 'timeouts', action: 'select' }), 200).rows;
        expect(row.statement_timeout).not.toBe('0');
        expect(row.lock_timeout).not.toBe('0');
        expect(row.application_name).toMatch(/^basalt-db-/);
      }
    });

    test('transactions of a key and of a user commit and roll back through the pooler', async () => {
      const carol = users[2]!;
      // A service key's row names its owner (no uid to default to): carol's, so her selects below stay hers.
      const owner_id = carol.user.id;
      for (const [who, body, end] of [
        [service, 'key committed', 'commit'],
        [service, 'key rolled back', 'rollback'],
        [carol, 'carol committed', 'commit'],
        [carol, 'carol rolled back', 'rollback'],
      ] as const) {
        const id = expectA(await dbTx(a, who, 'begin'), 200).transaction_id as string;
        const data = who === service ? { body, owner_id } : { body };
        expectA(await q(a, who, { action: 'insert', data, transaction_id: id }), 200);
        const inside = await q(a, who, { action: 'select', fields: ['body'], transaction_id: id });
        expect(expectA(inside, 200).rows.map((r: { body: string }) => r.body)).toContain(body);
        expectA(await dbTx(a, who, `${id}/${end}`), 200);
      }
      const seen = (await q(b, service, { action: 'select', fields: ['body'], limit: 1000 })).body.data.rows.map(
        (r: { body: string }) => r.body,
      );
      expect(seen).toContain('key committed');
      expect(seen).toContain('carol committed');
      expect(seen).not.toContain('key rolled back');
      expect(seen).not.toContain('carol rolled back');
    });

    test('a change written through A reaches a realtime stream on B', async () => {
      const onB = await openSse(`${b.publicUrl}/api/v1/realtime?tables=notes`, { 'x-api-key': service });
      expect(onB.status).toBe(200);
      try {
        const started = performance.now();
        expectA(await q(a, service, { action: 'insert', data: { body: 'live', owner_id: users[0]!.user.id } }), 200);
        // A new stream joins at B's reader's position, which polled may be a second behind the
        // outbox: changes of the tests before can come first (docs/realtime.md, "Delivery").
        const live = () => onB.of().find((e) => e.data.row.body === 'live');
        await eventually(() => live() !== undefined, { what: "the 'live' change on B", timeout: 10_000 });
        expect(live()!.data.row.owner_id).toBe(users[0]!.user.id);
        // LISTEN past the pooler wakes B's reader at once; polled, within a poll (1 s) or its backstop (2 s).
        expect(performance.now() - started).toBeLessThan(direct ? 1000 : 3500);
      } finally {
        onB.close();
      }
    });

    test('a setting changed on A applies on B; a key revoked on A is refused on B', async () => {
      const over = { action: 'select', fields: ['body'], limit: 50 };
      expectA(await q(b, service, over), 200);
      await a.settings.set('db.max_limit', 20);
      try {
        await eventually(async () => expectAError(await q(b, service, over), 400, 'validation_error'), {
          what: 'B to apply db.max_limit 20',
        });
      } finally {
        await a.settings.unset('db.max_limit');
      }
      await eventually(async () => expectA(await q(b, service, over), 200), { what: 'B to drop db.max_limit' });
      const doomed = await createKey(a, {
        type: 'service',
        service: 'doomed',
        permissions: ['db:query'],
        tables: ['notes'],
      });
      expectA(await q(b, doomed, { action: 'select', limit: 1 }), 200);
      await revokeKey(a, doomed);
      await eventually(async () => expect((await q(b, doomed, { action: 'select', limit: 1 })).status).toBe(401), {
        what: 'B to refuse the revoked key',
        timeout: 5000,
      });
    });

    test('32 connections of mixed user and service requests: every answer 200, no row of another user', async () => {
      const total = 1600;
      let next = 0;
      const failures: string[] = [];
      const worker = async (w: number) => {
        for (let i = next++; i < total; i = next++) {
          const s = (i + w) % 2 ? a : b;
          const user = users[i % users.length]!;
          const kind = i % 4;
          const r =
            kind === 0
              ? await q(s, service, { action: 'select', fields: ['id', 'owner_id'], limit: 20 })
              : kind === 1
                ? await q(s, user, { action: 'insert', data: { body: `load ${i}` }, fields: ['owner_id'] })
                : await q(s, user, {
                    action: 'select',
                    fields: ['owner_id', 'body'],
                    limit: 20,
                    sort: [{ field: 'id', direction: 'desc' }],
                  });
          if (r.status !== 200) {
            failures.push(`${r.status} ${r.text.slice(0, 200)}`);
            continue;
          }
          if (kind !== 0)
            for (const row of r.body.data.rows as { owner_id: string }[])
              if (row.owner_id !== user.user.id) failures.push(`user ${user.user.id} read a row of ${row.owner_id}`);
        }
      };
      await Promise.all(Array.from({ length: 32 }, (_, w) => worker(w)));
      expect(failures.slice(0, 5)).toEqual([]);
      expect(failures.length).toBe(0);
    }, 120_000);
  });
});
