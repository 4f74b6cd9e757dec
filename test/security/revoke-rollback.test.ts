/**
 * Revoking an API key rolls back its open Database API transactions at once, releasing
 * their row locks (docs/database.md, Transactions; docs/api-keys.md): on the instance
 * that revokes, and on every other instance sharing the database (through the key
 * service's NOTIFY), whether the revocation comes from the service (admin API) or from
 * `basalt keys revoke` in another process. Other keys' transactions are untouched.
 * The idle timeout is stretched to a minute, so only the revocation explains a prompt end.
 * How many transactions an instance holds open, and a revocation inside a caller's own
 * transaction, are read or made in process (`ON_SOURCE`); the released row locks show the
 * rollback on either target.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, startServer, type TestServer } from '../helpers/server';
import { runCli } from '../helpers/cli';
import { adminReq, signInAdmin } from '../helpers/admin';
import { createKey, listKeys } from '../helpers/keys';
import { auditRows } from '../admin/support';
import { eventually } from '../helpers/wait';

const IDLE = { BASALT_DB_TRANSACTION_IDLE_TIMEOUT_MS: '60000' };
const SCHEMA =
  'CREATE TABLE public.accounts (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO public.accounts VALUES (1, 100), (2, 200);';

interface Key {
  id: string;
  key: string;
}

async function newKey(s: TestServer): Promise<Key> {
  const key = await createKey(s, { type: 'service', service: 'bank', permissions: ['db:query'], tables: ['accounts'] });
  const id = (await listKeys(s)).find((k) => key.startsWith(k.prefix) && key.endsWith(k.last4))!.id;
  return { id, key };
}

/** Revoke as the admin API does: the key service in process, or the executable's admin API. */
async function revoke(s: TestServer, k: Key): Promise<void> {
  if (s.target === 'source') await s.platform.services.keys.revoke(k.id);
  else await s.admin('POST', `/api/admin/keys/${k.id}/revoke`);
}

/** Open Database API transactions of the instance (the source only: undefined on the executable). */
const openTransactions = (s: TestServer): number | undefined =>
  ON_SOURCE ? s.platform.services.database.transactions.size : undefined;

/** On the source: the instance holds `n` open transactions. */
function expectOpen(s: TestServer, n: number): void {
  if (ON_SOURCE) expect(openTransactions(s)).toBe(n);
}

const query = (s: TestServer, k: Key, body: Record<string, unknown>) =>
  s.req('POST', '/api/v1/db/query', { headers: { 'x-api-key': k.key }, body: { entity: 'accounts', ...body } });
const begin = async (s: TestServer, k: Key): Promise<string> => {
  const r = await s.req('POST', '/api/v1/db/transaction/begin', { headers: { 'x-api-key': k.key }, body: {} });
  expect(r.status).toBe(200);
  return r.body.data.transaction_id;
};
const setBalance = (s: TestServer, k: Key, id: number, balance: number, tx?: string) =>
  query(s, k, {
    action: 'update',
    data: { balance },
    filters: [{ field: 'id', op: 'eq', value: id }],
    ...(tx ? { transaction_id: tx } : {}),
  });
/** The account's balance, read through the Database API with a key of its own (no transaction). */
const balance = async (s: TestServer, id: number) => {
  const reader = await newKey(s);
  const r = await query(s, reader, {
    action: 'select',
    fields: ['balance'],
    filters: [{ field: 'id', op: 'eq', value: id }],
  });
  expect(r.status).toBe(200);
  return r.body.data.rows[0].balance as number;
};

describe.each(ENGINES)('revoking a key ends its transactions on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine, { env: IDLE, migrations: { '001_accounts.sql': SCHEMA } });
  });
  afterAll(() => s.stop());

  test('its transaction is rolled back at once: the write is gone and the row is free', async () => {
    const k = await newKey(s);
    const other = await newKey(s);
    const tx = await begin(s, k);
    expect((await setBalance(s, k, 1, 0, tx)).status).toBe(200);
    // Another key's transaction survives the revocation (external: on the embedded engine
    // it would wait for the first, which holds the database).
    const otherTx = engine === 'external' ? await begin(s, other) : undefined;
    const t0 = performance.now();
    await revoke(s, k);
    const ms = performance.now() - t0;
    expect(ms).toBeLessThan(5000); // the idle timeout is 60 s
    expectOpen(s, otherTx ? 1 : 0);
    if (otherTx) {
      expect((await setBalance(s, other, 2, 250, otherTx)).status).toBe(200);
      expect(
        (
          await s.req('POST', `/api/v1/db/transaction/${otherTx}/commit`, {
            headers: { 'x-api-key': other.key },
            body: {},
          })
        ).status,
      ).toBe(200);
    }
    // The row is writable at once by another key, and the revoked write never happened.
    const w = await setBalance(s, other, 1, 101);
    expect(w.status).toBe(200);
    expect(await balance(s, 1)).toBe(101);
    // The revoked key itself gets 401 on its old transaction.
    expect(
      (await s.req('POST', `/api/v1/db/transaction/${tx}/commit`, { headers: { 'x-api-key': k.key }, body: {} }))
        .status,
    ).toBe(401);
  });

  test.if(ON_SOURCE)('several open transactions of the key all end', async () => {
    const k = await newKey(s);
    // On the embedded engine one transaction holds the database, so one at a time there.
    const n = engine === 'external' ? 3 : 1;
    for (let i = 0; i < n; i++) await begin(s, k);
    expect(s.platform.services.database.transactions.size).toBe(n);
    await s.platform.services.keys.revoke(k.id);
    expect(s.platform.services.database.transactions.size).toBe(0);
  });

  test.if(ON_SOURCE)("a revocation inside the caller's transaction (admin API) ends them when it commits", async () => {
    if (engine === 'embedded') {
      // One session: the caller's own transaction would wait for the API transaction, so it calls revoked() first.
      const k = await newKey(s);
      await begin(s, k);
      await s.platform.services.keys.revoked(k.id);
      expect(s.platform.services.database.transactions.size).toBe(0);
      await s.platform.db.transaction((tx) => s.platform.services.keys.revoke(k.id, tx));
      expect((await query(s, k, { action: 'select' })).status).toBe(401);
      return;
    }
    const k = await newKey(s);
    const tx = await begin(s, k);
    expect((await setBalance(s, k, 2, 0, tx)).status).toBe(200);
    await s.platform.db.transaction((t) => s.platform.services.keys.revoke(k.id, t));
    expect(
      await eventually(() => s.platform.services.database.transactions.size === 0, {
        timeout: 3000,
        interval: 20,
        what: 'no open transactions',
      }),
    ).toBe(true);
    expect(await balance(s, 2)).toBe(250);
  });
  // On the embedded engine the open API transaction holds the one session: the admin
  // request's session lookup takes it back from the idle transaction (docs/database.md,
  // "Waiting for the database"), and the route rolls the key's transactions back first.
  test('POST /api/admin/keys/:id/revoke ends them at once', async () => {
    const admin = await signInAdmin(s);
    const k = await newKey(s);
    const tx = await begin(s, k);
    expect((await setBalance(s, k, 2, 1, tx)).status).toBe(200);
    const t0 = performance.now();
    const r = await adminReq(s, admin, 'POST', `/api/admin/keys/${k.id}/revoke`);
    expect(r.status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(5000); // the idle timeout is 60 s
    expectOpen(s, 0);
    expect(await balance(s, 2)).not.toBe(1);
    expect((await auditRows(s, 'keys.revoke', admin)).filter((e) => e.target === k.id)).toHaveLength(1);
  });
});

describe.skipIf(!ENGINES.includes('external'))(
  'revoking on one instance ends the transactions on another (external)',
  () => {
    let a: TestServer;
    let b: TestServer;
    beforeAll(async () => {
      const migrations = { '001_accounts.sql': SCHEMA };
      a = await startServer('external', { env: IDLE, migrations });
      b = await startServer('external', { env: IDLE, db: a.db, migrations });
    });
    afterAll(async () => {
      await b.stop();
      await a.stop();
    });

    test.each([
      ['through the key service on instance A (the admin API)', async (k: Key) => revoke(a, k)],
      [
        'through `basalt keys revoke` in another process',
        async (k: Key) => {
          const r = await runCli(['keys', 'revoke', k.id], {
            BASALT_DATABASE_URL: a.db.url,
            BASALT_DATA_DIR: a.db.dataDir,
          });
          expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
        },
      ],
    ])('%s', async (_name, revoke) => {
      const k = await newKey(a);
      const other = await newKey(a);
      const tx = await begin(b, k);
      expect((await setBalance(b, k, 1, 0, tx)).status).toBe(200);
      expectOpen(b, 1);
      await revoke(k);
      if (ON_SOURCE)
        expect(
          await eventually(() => openTransactions(b) === 0, {
            timeout: 3000,
            interval: 20,
            what: 'no open transactions',
          }),
        ).toBe(true);
      else await Bun.sleep(500); // the revocation reaches B by notification: a moment, far from the idle timeout
      // The lock is released: a write to the same row from instance A goes through at once
      // (while held it would wait and end in 503 lock_timeout).
      const t0 = performance.now();
      const w = await setBalance(a, other, 1, 111);
      expect(w.status).toBe(200);
      expect(performance.now() - t0).toBeLessThan(1000);
      expect(await balance(a, 1)).toBe(111);
      // The revoked key is refused on both instances.
      expect((await query(b, k, { action: 'select' })).status).toBe(401);
      expect((await query(a, k, { action: 'select' })).status).toBe(401);
    });
  },
);
