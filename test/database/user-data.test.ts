/**
 * Users' own data on the Database API (docs/database.md, "Users' own data"): signed-in
 * users and anon under PostgreSQL row-level security, on both engines, through HTTP. How
 * many Database API transactions are open is read in process (`ON_SOURCE`); on the executable
 * the released row lock shows the rollback.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import { interactive } from '../../src/db/interactive';
import { ON_SOURCE, startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { signInUser, type SignedInUser } from '../helpers/users';
import { expectA, expectAError } from '../helpers/envelopes';
import { expectNoInternals } from './fixtures';
import { dbQuery, dbTx, NOTES_MIGRATION, type Who } from './user-data.fixtures';

describe.each(ENGINES)("users' own data on %s", (engine) => {
  let s: TestServer;
  let alice: SignedInUser;
  let bob: SignedInUser;
  let service: string;
  let publicKey: string;
  const dir = mkdtempSync(join(tmpdir(), 'basalt-user-data-'));
  const q = (who: Who, body: Record<string, unknown>) => dbQuery(s, who, { entity: 'notes', ...body });
  const bodies = async (who: Who) => {
    const r = await q(who, { action: 'select', fields: ['body'], sort: [{ field: 'id' }] });
    return expectA(r, 200).rows.map((x: { body: string }) => x.body);
  };

  beforeAll(async () => {
    writeFileSync(join(dir, '001_notes.sql'), NOTES_MIGRATION);
    s = await startServer(engine, { env: { BASALT_MIGRATIONS_DIR: dir } });
    [alice, bob] = [await signInUser(s), await signInUser(s)];
    service = await createKey(s, { type: 'service', service: 'app', permissions: ['db:query'], tables: ['notes'] });
    publicKey = await createKey(s, { type: 'public' });
    for (const [who, body, shared] of [
      [alice, 'alice private', false],
      [alice, 'alice shared', true],
      [bob, 'bob private', false],
    ] as const)
      expectA(await q(who, { action: 'insert', data: { body, shared } }), 200);
    // The first start of a test process makes the embedded engine's template (initdb): slow on a loaded machine.
  }, 240_000);
  afterAll(async () => {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('each user sees their own rows and the shared ones; anon only the shared ones', async () => {
    expect(await bodies(alice)).toEqual(['alice private', 'alice shared']);
    expect(await bodies(bob)).toEqual(['alice shared', 'bob private']);
    expect(await bodies(undefined)).toEqual(['alice shared']);
    expect(await bodies(publicKey)).toEqual(['alice shared']);
    // A service key is the platform's owner role: no policy applies.
    expect(await bodies(service)).toEqual(['alice private', 'alice shared', 'bob private']);
  });

  test('an insert takes its owner from the token: basalt.uid() as the default', async () => {
    const r = await q(bob, { action: 'insert', data: { body: 'bob again' }, fields: ['owner_id', 'body'] });
    expectA(r, 200, { rows: [{ owner_id: bob.user.id, body: 'bob again' }], count: 1 });
    expectA(await q(bob, { action: 'delete', filters: [{ field: 'body', op: 'eq', value: 'bob again' }] }), 200);
  });

  test('the identity functions see the verified token', async () => {
    const r = await dbQuery(s, alice, { entity: 'whoami', action: 'select' });
    const sid = JSON.parse(Buffer.from(alice.access_token.split('.')[1]!, 'base64url').toString()).sid;
    expectA(r, 200, {
      rows: [
        {
          uid: alice.user.id,
          role: 'user',
          sub: alice.user.id,
          email: alice.email,
          email_verified: false,
          sid,
          db_role: 'basalt_user',
        },
      ],
      count: 1,
    });
    expectA(await dbQuery(s, undefined, { entity: 'whoami', action: 'select' }), 200, {
      rows: [
        { uid: null, role: 'anon', sub: null, email: null, email_verified: null, sid: null, db_role: 'basalt_anon' },
      ],
      count: 1,
    });
  });

  test('writes to rows the policies hide change nothing and answer count 0', async () => {
    const hers = [{ field: 'body', op: 'eq', value: 'alice private' }];
    expectA(await q(bob, { action: 'update', data: { body: 'pwned' }, filters: hers }), 200, { rows: [], count: 0 });
    expectA(await q(bob, { action: 'delete', filters: hers }), 200, { rows: [], count: 0 });
    // The shared row is readable by bob, not writable.
    const shared = [{ field: 'body', op: 'eq', value: 'alice shared' }];
    expectA(await q(bob, { action: 'update', data: { body: 'pwned' }, filters: shared }), 200, { rows: [], count: 0 });
    expect(await bodies(alice)).toEqual(['alice private', 'alice shared']);
  });

  test('a row WITH CHECK refuses → 403 forbidden naming the table, never a 500', async () => {
    const forged = await q(bob, { action: 'insert', data: { body: 'forged', owner_id: alice.user.id } });
    expectAError(forged, 403, 'forbidden', { details: { entity: 'notes' } });
    expect(forged.body.error.message).toContain("'notes'");
    expectNoInternals(forged.text);
    const moved = await q(bob, {
      action: 'update',
      data: { owner_id: alice.user.id },
      filters: [{ field: 'body', op: 'eq', value: 'bob private' }],
    });
    expectAError(moved, 403, 'forbidden', { details: { entity: 'notes' } });
    expect(await bodies(service)).toEqual(['alice private', 'alice shared', 'bob private']);
  });

  test('tables not granted answer like a whitelist miss; an unknown table answers the same', async () => {
    for (const entity of ['hidden', 'no_such_table', 'schema_migrations', 'users', 'api_keys', 'pg_authid']) {
      const r = await dbQuery(s, alice, { entity, action: 'select' });
      expectAError(r, 403, 'forbidden', {
        message: `You may not access entity '${entity}': basalt_user holds no privilege on it for this. Grant it in a migration (docs/database.md, "Who is which role").`,
        details: { role: 'basalt_user' },
      });
    }
    // Anon on a table not granted to basalt_anon: 401 as before, saying how to sign in (the same
    // words for every table, so nothing tells which exist).
    for (const entity of ['hidden', 'no_such_table'])
      expectAError(await dbQuery(s, undefined, { entity, action: 'select' }), 401, 'unauthorized', {
        message:
          'No credentials: sign in and send the user\'s access token (Authorization: Bearer …), or a service key (X-API-Key). Without either, a request reaches only what is granted to basalt_anon (docs/database.md, "Who is which role").',
      });
    expectAError(await dbQuery(s, publicKey, { entity: 'hidden', action: 'select' }), 403, 'forbidden', {
      message: "This API key lacks the 'db:query' permission.",
    });
    // An action the role does not hold is refused the same way.
    expectAError(await q(undefined, { action: 'insert', data: { body: 'x' } }), 403, 'forbidden');
    expectAError(
      await dbQuery(s, alice, { entity: 'posts', action: 'delete', filters: [{ field: 'id', op: 'eq', value: 1 }] }),
      403,
      'forbidden',
    );
  });

  test('column grants: only granted columns come back; naming another one → 403 naming it', async () => {
    expectA(await dbQuery(s, undefined, { entity: 'posts', action: 'select', sort: [{ field: 'id' }] }), 200, {
      rows: [
        { id: 1, title: 'hello' },
        { id: 2, title: 'world' },
      ],
      count: 2,
    });
    const named = [
      { fields: ['id', 'secret'] },
      { filters: [{ field: 'secret', op: 'eq', value: 's1' }] },
      { sort: [{ field: 'secret' }] },
      { fields: ['no_such_column'] },
    ];
    for (const extra of named) {
      const r = await dbQuery(s, alice, { entity: 'posts', action: 'select', ...extra });
      const column = JSON.stringify(extra).includes('no_such_column') ? 'no_such_column' : 'secret';
      expectAError(r, 403, 'forbidden', { details: { column } });
      expect(r.body.error.message).toContain(`'${column}'`);
    }
    const one = [{ field: 'id', op: 'eq', value: 1 }];
    expectAError(
      await dbQuery(s, alice, { entity: 'posts', action: 'update', data: { secret: 'x' }, filters: one }),
      403,
      'forbidden',
      { details: { column: 'secret' } },
    );
    expectA(await dbQuery(s, alice, { entity: 'posts', action: 'update', data: { title: 'hi' }, filters: one }), 200, {
      rows: [{ id: 1, title: 'hi' }],
      count: 1,
    });
  });

  test('a role that may insert but read nothing gets its count, no rows', async () => {
    expectA(
      await dbQuery(s, undefined, { entity: 'guestbook', action: 'insert', data: [{ msg: 'a' }, { msg: 'b' }] }),
      200,
      {
        rows: [],
        count: 2,
      },
    );
    expectAError(await dbQuery(s, undefined, { entity: 'guestbook', action: 'select' }), 403, 'forbidden');
    expectAError(
      await dbQuery(s, undefined, { entity: 'guestbook', action: 'insert', data: { msg: 'a' }, fields: ['id'] }),
      403,
      'forbidden',
      { details: { column: 'id' } },
    );
  });

  test('transactions belong to the user who began them', async () => {
    // Credentials checked just before, so their cached answers serve the requests made
    // while the transaction holds the embedded engine's database.
    await bodies(bob);
    await bodies(service);
    const begun = expectA(await dbTx(s, alice, 'begin'), 200);
    const id = begun.transaction_id as string;
    expectA(await q(alice, { action: 'insert', data: { body: 'in tx' }, transaction_id: id }), 200);
    // Inside, alice is still alice: her rows only, her uncommitted one included.
    expect(
      expectA(await q(alice, { action: 'select', fields: ['body'], sort: [{ field: 'id' }], transaction_id: id }), 200)
        .rows.length,
    ).toBe(3);
    const whoInside = await dbQuery(s, alice, {
      entity: 'whoami',
      action: 'select',
      fields: ['uid'],
      transaction_id: id,
    });
    expectA(whoInside, 200, { rows: [{ uid: alice.user.id }], count: 1 });
    for (const who of [bob, service, undefined] as Who[]) {
      const r = await q(who, { action: 'select', transaction_id: id });
      expectAError(r, 404, 'transaction_not_found');
    }
    expectAError(await dbTx(s, bob, `${id}/commit`), 404, 'transaction_not_found');
    expectAError(await dbTx(s, bob, `${id}/rollback`), 404, 'transaction_not_found');
    // Outside it nothing shows yet (on the embedded engine the open transaction holds the
    // database, so a statement outside it would wait for it to end: not asked there).
    if (engine === 'external') expect(await bodies(alice)).toEqual(['alice private', 'alice shared']);
    expectA(await dbTx(s, alice, `${id}/commit`), 200, { transaction_id: id, status: 'committed' });
    expect(await bodies(alice)).toEqual(['alice private', 'alice shared', 'in tx']);
    expectA(await q(alice, { action: 'delete', filters: [{ field: 'body', op: 'eq', value: 'in tx' }] }), 200);
    // Anon never holds a transaction: the answer of before.
    expectAError(await dbTx(s, undefined, 'begin'), 401, 'unauthorized');
    expectAError(await dbTx(s, publicKey, 'begin'), 403, 'forbidden');
  });

  test('a policy refusal inside a transaction aborts it like any failed query', async () => {
    const id = expectA(await dbTx(s, bob, 'begin'), 200).transaction_id as string;
    const r = await q(bob, { action: 'insert', data: { body: 'x', owner_id: alice.user.id }, transaction_id: id });
    expectAError(r, 403, 'forbidden', { details: { entity: 'notes' } });
    expectAError(await dbTx(s, bob, `${id}/commit`), 409, 'transaction_aborted');
  });

  test('a user logged out or disabled mid-transaction: rolled back at once, its locks released, 401 after', async () => {
    // A long idle timeout: what ends these transactions must be the logout and the disabling.
    await s.settings.set('db.transaction_idle_timeout_ms', 120_000);
    const open = () => s.platform.services.database.transactions.size;
    // As an administrator's request: in process, or through the executable's admin API.
    const disable = async (id: string) => {
      if (ON_SOURCE) await interactive(() => s.platform.services.auth.setDisabled(id, true));
      else await s.admin('POST', `/api/admin/users/${id}/disable`);
    };
    try {
      for (const end of ['logout', 'disable'] as const) {
        const carol = await signInUser(s);
        expectA(await q(carol, { action: 'insert', data: { body: `${end} before` } }), 200);
        const id = expectA(await dbTx(s, carol, 'begin'), 200).transaction_id as string;
        expectA(await q(carol, { action: 'insert', data: { body: `${end} in tx` }, transaction_id: id }), 200);
        // The transaction holds a row lock on her earlier row.
        const mine = [{ field: 'body', op: 'eq', value: `${end} before` }];
        const locked = await q(carol, {
          action: 'update',
          data: { body: `${end} locked` },
          filters: mine,
          transaction_id: id,
        });
        expect(expectA(locked, 200).count).toBe(1);
        if (ON_SOURCE) expect(open()).toBe(1);
        if (end === 'logout') {
          const out = await s.req('POST', '/api/v1/auth/logout', { headers: carol.headers(), body: {} });
          expect(out.status).toBeLessThan(300);
        } else await disable(carol.user.id);
        // Rolled back without waiting for its idle timeout (on the embedded engine the
        // logout itself, a write, already made the idle transaction give the database back).
        if (ON_SOURCE) {
          for (let i = 0; i < 100 && open() > 0; i++) await Bun.sleep(50);
          expect(open()).toBe(0);
        }
        // Its lock is gone: a service key changes the row at once (a held lock would answer 503 lock_timeout).
        const after = await q(service, { action: 'update', data: { body: `${end} after` }, filters: mine });
        expect(expectA(after, 200).count).toBe(1);
        const code = 'session_revoked';
        expectAError(await q(carol, { action: 'select', transaction_id: id }), 401, code);
        expectAError(await dbTx(s, carol, `${id}/commit`), 401, code);
        expectAError(await q(carol, { action: 'select' }), 401, code);
        const all = await bodies(service);
        expect(all).not.toContain(`${end} in tx`);
        expect(all).not.toContain(`${end} locked`);
        expect(all).toContain(`${end} after`);
        expectA(
          await q(service, { action: 'delete', filters: [{ field: 'body', op: 'eq', value: `${end} after` }] }),
          200,
        );
      }
      expectAError(
        await q({ headers: () => ({ authorization: 'Bearer not.a.token' }) }, { action: 'select' }),
        401,
        'unauthorized',
      );
    } finally {
      await s.settings.unset('db.transaction_idle_timeout_ms');
    }
  });

  test('100 concurrent requests alternating two users never see each other', async () => {
    const users = [alice, bob];
    const answers = await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        const u = users[i % 2]!;
        const r =
          i % 4 < 2
            ? await dbQuery(s, u, { entity: 'whoami', action: 'select', fields: ['uid', 'email'] })
            : await q(u, { action: 'select', fields: ['owner_id', 'shared'] });
        return { u, data: expectA(r, 200) };
      }),
    );
    for (const [i, { u, data }] of answers.entries()) {
      if (i % 4 < 2) expect(data.rows).toEqual([{ uid: u.user.id, email: u.email }]);
      else {
        expect(data.rows.length).toBeGreaterThan(0);
        for (const row of data.rows) expect(row.owner_id === u.user.id || row.shared).toBe(true);
      }
    }
  });

  test('injection at every position under a policy reaches nothing', async () => {
    const evil = [`x' OR '1'='1`, `x"; DROP TABLE notes; --`, `body) OR (true`, `notes" WHERE true --`];
    for (const e of evil) {
      for (const body of [
        { entity: e, action: 'select' },
        { entity: 'notes', action: 'select', fields: [e] },
        { entity: 'notes', action: 'select', filters: [{ field: e, op: 'eq', value: 1 }] },
        { entity: 'notes', action: 'select', sort: [{ field: e }] },
        { entity: 'notes', action: 'insert', data: { [e]: 'x' } },
        { entity: 'notes', action: 'update', data: { [e]: 'x' }, filters: [{ field: 'id', op: 'gt', value: 0 }] },
      ]) {
        const r = await dbQuery(s, bob, body);
        expect(r.status).toBe(403);
        expectNoInternals(r.text);
      }
      for (const body of [
        { action: 'select', filters: [{ field: 'body', op: e, value: 'x' }] },
        { action: 'select', sort: [{ field: 'body', direction: e }] },
        { action: 'select', limit: e },
      ]) {
        const r = await q(bob, body);
        expect(r.status).toBe(400);
        expectNoInternals(r.text);
      }
      // A value is a value: it matches nothing, it changes nothing of alice's.
      expectA(await q(bob, { action: 'select', filters: [{ field: 'body', op: 'eq', value: e }] }), 200, {
        rows: [],
        count: 0,
      });
      expectA(
        await q(bob, { action: 'update', data: { body: e }, filters: [{ field: 'body', op: 'like', value: e }] }),
        200,
        {
          rows: [],
          count: 0,
        },
      );
    }
    expect(await bodies(alice)).toEqual(['alice private', 'alice shared']);
    expect(await bodies(service)).toEqual(['alice private', 'alice shared', 'bob private']);
  });

  test("raw SQL stays refused for users; a transaction id from another user's is 404", async () => {
    expectAError(await dbQuery(s, bob, { entity: 'notes', query: 'SELECT 1' }), 403, 'raw_sql_disabled');
    expectAError(await q(bob, { action: 'select', transaction_id: crypto.randomUUID() }), 404, 'transaction_not_found');
  });

  describe('in api_key_required mode', () => {
    beforeAll(() => s.settings.set('web.public_api_access_mode', 'api_key_required'));
    afterAll(() => s.settings.set('web.public_api_access_mode', 'open'));

    test('a user needs the public key beside the token; the public key alone is anon', async () => {
      expectAError(await q(alice, { action: 'select' }), 401, 'api_key_required');
      expectAError(await q(undefined, { action: 'select' }), 401, 'api_key_required');
      const withKey = { headers: () => alice.headers({ 'x-api-key': publicKey }) };
      expect(await bodies(withKey)).toEqual(['alice private', 'alice shared']);
      expect(await bodies(publicKey)).toEqual(['alice shared']);
      // A service key stays a service key, whatever Authorization says.
      expect(await bodies({ headers: () => alice.headers({ 'x-api-key': service }) })).toEqual([
        'alice private',
        'alice shared',
        'bob private',
      ]);
    });
  });
});
