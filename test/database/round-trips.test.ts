/**
 * Round trips to PostgreSQL per Database API request (docs/database.md, "How a statement
 * runs as a user"): counted on the wire by a proxy in front of the server, not timed, so
 * the answer holds on a loaded machine. A user's select takes its transaction, identity,
 * statement and commit in one round trip, as a service key's select does; both go as batches on
 * their pool's own wire-protocol connections (src/db/external-wire.ts; a key's on the API pool, a
 * user's on the authenticator's), counted by the sends that name its statements.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ADMIN_URL, freshDb, type FreshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { tcpProxy } from '../helpers/tcp-proxy';
import { createKey } from '../helpers/keys';
import { signInUser, type SignedInUser } from '../helpers/users';
import { expectA } from '../helpers/envelopes';
import { dbQuery, dbTx, NOTES_MIGRATION } from './user-data.fixtures';

const API = 'basalt-db-api';
/** The pool users' statements run on (logged in as the authenticator: docs/database.md). */
const USERS = 'basalt-db-user';
const N = 20;

describe.skipIf(!ADMIN_URL)('round trips per Database API request (external PostgreSQL)', () => {
  let s: TestServer;
  let proxy: ReturnType<typeof tcpProxy>;
  let alice: SignedInUser;
  let service: string;

  let db: FreshDb;

  beforeAll(async () => {
    db = await freshDb('external');
    const target = new URL(db.url);
    proxy = tcpProxy(target.hostname, Number(target.port || 5432));
    const via = new URL(db.url);
    via.hostname = '127.0.0.1';
    via.port = String(proxy.port);
    s = await startServer('external', {
      db: { ...db, env: { ...db.env, BASALT_DATABASE_URL: via.toString() } },
      migrations: { '001_notes.sql': NOTES_MIGRATION },
    });
    alice = await signInUser(s);
    service = await createKey(s, { type: 'service', service: 'app', permissions: ['db:query'], tables: ['notes'] });
    for (let i = 0; i < 12; i++)
      expectA(await dbQuery(s, alice, { entity: 'notes', action: 'insert', data: { body: `n${i}` } }), 200);
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
    proxy?.stop();
    await db?.drop();
  });

  /** Round trips on the caller's pool's connections for N selects made one after another (after one that prepares). */
  async function tripsPer(who: SignedInUser | string, body: Record<string, unknown>): Promise<number> {
    const pool = typeof who === 'string' ? API : USERS;
    const select = () => dbQuery(s, who, { entity: 'notes', action: 'select', ...body });
    expectA(await select(), 200);
    const before = proxy.roundTrips(pool);
    const other = proxy.roundTrips(pool === API ? USERS : API);
    for (let i = 0; i < N; i++) expect(expectA(await select(), 200).rows.length).toBe(10);
    // Nothing on the other pool: a key's statements never run on the authenticator's, nor a user's on the key's.
    expect(proxy.roundTrips(pool === API ? USERS : API)).toBe(other);
    return (proxy.roundTrips(pool) - before) / N;
  }

  const body = { filters: [{ field: 'body', op: 'like', value: 'n%' }], limit: 10 };

  test("a service key's select: one round trip", async () => {
    expect(await tripsPer(service, body)).toBe(1);
  });

  test("a service key's select, and its total, go as batches on the pool's own connections, not the driver's", async () => {
    const before = proxy.wireSends(API);
    await tripsPer(service, body);
    // The select that prepares and the N counted, one batch each.
    expect(proxy.wireSends(API) - before).toBe(N + 1);
    const withTotal = proxy.wireSends(API);
    await tripsPer(service, { ...body, total: true });
    // The select with its total is one statement (the count a column of it): one batch each.
    expect(proxy.wireSends(API) - withTotal).toBe(N + 1);
    expect(await tripsPer(service, { ...body, total: true })).toBe(1);
  });

  test("a user's select: one round trip (transaction, identity, statement and commit sent together)", async () => {
    expect(await tripsPer(alice, body)).toBe(1);
  });

  test("a user's select with its total: still one round trip", async () => {
    expect(await tripsPer(alice, { ...body, total: true })).toBe(1);
  });

  test("a service key's transaction round: one round trip per request, on the API pool alone", async () => {
    const round = async () => {
      const id: string = expectA(await dbTx(s, service, 'begin'), 200).transaction_id;
      for (let i = 0; i < 3; i++)
        expectA(
          await dbQuery(s, service, {
            entity: 'notes',
            action: 'insert',
            data: { body: 'tx', owner_id: alice.user.id },
            transaction_id: id,
          }),
          200,
        );
      expectA(await dbTx(s, service, `${id}/commit`), 200);
    };
    await round(); // prepares the insert on the connections it may land on
    await round();
    const api = proxy.roundTrips(API);
    const platform = proxy.roundTrips('basalt');
    for (let i = 0; i < 5; i++) await round();
    // Begin (BEGIN and its settings together), three inserts, commit.
    expect((proxy.roundTrips(API) - api) / 5).toBe(5);
    // Nothing per request on the platform's pool (one per round would be 5, one per request 25);
    // its own background work (the mail worker's poll, say) may fall in the window: CI once saw 2.
    expect(proxy.roundTrips('basalt') - platform).toBeLessThan(5);
  });
});
