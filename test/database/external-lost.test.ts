/**
 * A connection of the external engine's driver pool ended by the server while a caller holds
 * it (src/db/external.ts, `Held`; docs/operations.md, "When the database drops connections"):
 * the caller's next statement is refused as "database unavailable" without touching the
 * driver (whose write to the gone socket would throw out of reach and stop the process), and
 * the pool goes on serving. The whole process under load: ./failover.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { openExternal } from '../../src/db/external';
import { type Db, DatabaseUnavailableError } from '../../src/db/engine';
import { ADMIN_URL, freshDb, type FreshDb } from '../helpers/engines';
import { eventually } from '../helpers/wait';

const APP = 'basalt-lost-test';

describe.skipIf(!ADMIN_URL)('a held driver connection the server ended (external PostgreSQL)', () => {
  let fresh: FreshDb;
  let db: Db;
  let admin: postgres.Sql;
  beforeAll(async () => {
    fresh = await freshDb('external');
    // max 2: a connection the pool lost track of would soon leave nothing to serve from.
    db = await openExternal(fresh.url, { max: 2, connection: { application_name: APP } });
    admin = postgres(fresh.url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await db?.close();
    await admin?.end();
    await fresh?.drop();
  });

  const end = async (pid: number) => {
    await admin`SELECT pg_terminate_backend(${pid})`;
    // Gone from the server's list: the driver has been told (or will be, on its next read).
    await eventually(async () => (await admin`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length === 0);
  };

  test('a transaction whose backend was ended: its statements answer "database unavailable", the pool serves on', async () => {
    for (let round = 0; round < 3; round++) {
      const tx = await db.begin();
      const pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await end(pid);
      // Let the driver read the close before the next statement (the case that threw from a timer).
      await Bun.sleep(50);
      const refused = await tx.query('SELECT 1').then(
        () => null,
        (e) => e,
      );
      expect(refused).toBeInstanceOf(DatabaseUnavailableError);
      // Refused again at once, and a rollback ends the transaction without an error.
      expect(await tx.query('SELECT 1').catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError);
      await tx.rollback();
      expect(tx.closed).toBe(true);
      // The pool (two connections) still serves, plain statements and transactions alike.
      for (let i = 0; i < 4; i++) expect((await db.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
      expect(await db.transaction(async (t) => (await t.query<{ n: number }>('SELECT 2 AS n')).rows[0]!.n)).toBe(2);
    }
  });

  test('statements sent together whose backend is ended: "database unavailable", and the pool serves on', async () => {
    // Values that are not plain text go through the driver: BEGIN, the statements and COMMIT at once on a held connection.
    const statements = [
      { sql: 'SELECT pg_sleep(5)', params: [] },
      { sql: 'SELECT $1::bytea AS b', params: [new Uint8Array([1])] },
    ];
    for (let round = 0; round < 3; round++) {
      const answer = db.atOnce(statements).catch((e) => e);
      const rows = await eventually(
        () =>
          admin`SELECT pid FROM pg_stat_activity WHERE application_name = ${APP} AND state = 'active' AND query LIKE '%pg_sleep%'`,
        { until: (rows) => rows.length === 1, what: 'the sleeping statement' },
      );
      await end(rows[0]!.pid as number);
      // Before: COMMIT, queued by the driver behind the statements, was never answered.
      expect(await answer).toBeInstanceOf(DatabaseUnavailableError);
      await eventually(async () => (await db.query<{ n: number }>('SELECT 1 AS n')).rows[0]!.n === 1);
      for (let i = 0; i < 4; i++) expect((await db.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    }
  });
});
