/**
 * The roles and functions of users' own data (platform migration 100) and the one way to
 * run statements as an identity (src/modules/database/identity.ts), on both engines.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { ADMIN_URL, ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { openDb } from '../../src/db/open';
import { migratePlatform } from '../../src/db/migrate';
import { DatabaseUnavailableError, PgError, type Db } from '../../src/db/engine';
import {
  ANON,
  asIdentity,
  asIdentityAtOnce,
  assumeIdentity,
  checkIdentitySupport,
  userIdentity,
} from '../../src/modules/database/identity';
import { secureIdentities } from '../../src/modules/database/authenticator';

/**
 * Start-up's check as the Database API runs it: secured (the authenticator on external,
 * the embedded guard), then tried on the connections user statements would use.
 */
async function support(db: Db, url: string, userUrl = '') {
  let identities: Db | undefined;
  let at: string | undefined;
  try {
    return await checkIdentitySupport(
      db,
      async () => {
        const s = await secureIdentities(db, { platform: url, user: userUrl });
        at = s.url;
        return s;
      },
      async () => (at ? (identities ??= await openDb({ url: at, dataDir: '', poolMax: 1 })) : db),
    );
  } finally {
    await identities?.close();
  }
}

const ALICE = '6f1c1f36-58d5-4bc6-b1a4-7a9f6b5a1c11';
const BOB = '0b3f5a2e-9d4c-4e71-8a55-3c2d1e0f9a88';

describe.each(ENGINES)('identities on %s', (engine) => {
  let f: FreshDb;
  let db: Db;
  beforeAll(async () => {
    f = await freshDb(engine);
    db = await openDb({ url: f.url, dataDir: f.dataDir, poolMax: 4 });
    await migratePlatform(db);
    await db.exec(`
      CREATE TABLE notes (id serial PRIMARY KEY, owner_id uuid NOT NULL DEFAULT basalt.uid(), body text NOT NULL);
      ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
      GRANT SELECT, INSERT ON notes TO basalt_user;
      GRANT USAGE ON SEQUENCE notes_id_seq TO basalt_user;
      CREATE POLICY own ON notes FOR ALL TO basalt_user USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
      INSERT INTO notes (owner_id, body) VALUES ('${ALICE}', 'alice 1'), ('${BOB}', 'bob 1');`);
  });
  afterAll(async () => {
    await db.close();
    await f.drop();
  });

  test('roles are NOLOGIN and the platform role can run as both', async () => {
    const roles = await db.query<{ rolname: string; rolcanlogin: boolean }>(
      "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname IN ('basalt_anon', 'basalt_user') ORDER BY rolname",
    );
    expect(roles.rows).toEqual([
      { rolname: 'basalt_anon', rolcanlogin: false },
      { rolname: 'basalt_user', rolcanlogin: false },
    ]);
    expect(await support(db, f.url)).toEqual({ ok: true });
  });

  test('the functions read the identity of the transaction, and nothing outside it', async () => {
    const claims = { sub: ALICE, sid: 'sess', email: 'a@example.com', email_verified: true };
    const r = await asIdentity(db, userIdentity(ALICE, claims), (q) =>
      q.query<{ uid: string; role: string; jwt: unknown; who: string }>(
        'SELECT basalt.uid() AS uid, basalt.role() AS role, basalt.jwt() AS jwt, current_user AS who',
      ),
    );
    expect(r.rows[0]).toEqual({ uid: ALICE, role: 'user', jwt: claims, who: 'basalt_user' });
    const a = await asIdentity(db, ANON, (q) =>
      q.query('SELECT basalt.uid() AS uid, basalt.role() AS role, basalt.jwt() AS jwt, current_user AS who'),
    );
    expect(a.rows[0]).toEqual({ uid: null, role: 'anon', jwt: {}, who: 'basalt_anon' });
    // After the transaction, on every connection of the pool: the platform's own role, no identity.
    const after = await Promise.all(
      Array.from({ length: 8 }, () =>
        db.query<{ uid: string | null; role: string | null; jwt: unknown; who: string }>(
          'SELECT basalt.uid() AS uid, basalt.role() AS role, basalt.jwt() AS jwt, current_user AS who',
        ),
      ),
    );
    for (const x of after) expect(x.rows[0]).toEqual({ uid: null, role: null, jwt: {}, who: 'postgres' });
  });

  test('policies see the identity: own rows only, defaults and WITH CHECK use it', async () => {
    const rows = await asIdentity(db, userIdentity(BOB, {}), async (q) => {
      await q.query("INSERT INTO notes (body) VALUES ('bob 2')");
      return (await q.query<{ body: string }>('SELECT body FROM notes ORDER BY id')).rows.map((x) => x.body);
    });
    expect(rows).toEqual(['bob 1', 'bob 2']);
    const refused = await asIdentity(db, userIdentity(BOB, {}), (q) =>
      q.query('INSERT INTO notes (owner_id, body) VALUES ($1, $2)', [ALICE, 'forged']),
    ).catch((e) => e);
    expect(refused).toBeInstanceOf(PgError);
    expect((refused as PgError).code).toBe('42501');
    expect((await db.query("SELECT 1 FROM notes WHERE body = 'forged'")).rowCount).toBe(0);
  });

  test('identities of concurrent transactions never cross', async () => {
    const seen = await Promise.all(
      Array.from({ length: 40 }, (_, i) => {
        const uid = i % 2 ? ALICE : BOB;
        return asIdentity(db, userIdentity(uid, { sub: uid }), async (q) => {
          const r = await q.query<{ uid: string; sub: string; owners: string[] }>(
            "SELECT basalt.uid() AS uid, basalt.jwt()->>'sub' AS sub, array(SELECT DISTINCT owner_id::text FROM notes) AS owners",
          );
          return { uid, got: r.rows[0]! };
        });
      }),
    );
    for (const { uid, got } of seen) expect(got).toEqual({ uid, sub: uid, owners: [uid] });
  });

  test('nothing of the platform schema but the identity functions and realtime_policy is reachable', async () => {
    for (const sql of [
      'SELECT * FROM basalt.settings',
      'SELECT * FROM basalt.users',
      'SELECT * FROM basalt.api_keys',
      'SELECT * FROM basalt.platform_migrations',
    ]) {
      const e = await asIdentity(db, userIdentity(ALICE, {}), (q) => q.query(sql)).catch((x) => x);
      expect(e).toBeInstanceOf(PgError);
      expect((e as PgError).code).toBe('42501');
    }
    const fns = await db.query<{ name: string }>(
      `SELECT p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'basalt' AND has_function_privilege('basalt_user', p.oid, 'EXECUTE') ORDER BY 1`,
    );
    // realtime_policy (migration 175) tells the calling role its own policies: realtime asks it as the subscriber.
    expect(fns.rows.map((r) => r.name)).toEqual(['jwt', 'realtime_policy', 'role', 'uid']);
  });

  const WHO = 'SELECT basalt.uid() AS uid, basalt.role() AS role, current_user AS who';

  test('statements sent at once see the identity, which ends with them on every connection', async () => {
    const [who, own, flag] = await asIdentityAtOnce(db, userIdentity(ALICE, { sub: ALICE }), [
      { sql: WHO, params: [] },
      { sql: 'SELECT body FROM notes WHERE body LIKE $1 ORDER BY id LIMIT $2', params: ['%1', 10] },
      // A value that is not plain text or a number: the embedded engine runs these in a transaction instead.
      { sql: 'SELECT $1::boolean AS flag', params: [true] },
    ]);
    expect(who!.rows).toEqual([{ uid: ALICE, role: 'user', who: 'basalt_user' }]);
    expect(own!.rows).toEqual([{ body: 'alice 1' }]);
    expect(flag!.rows).toEqual([{ flag: true }]);
    const plain = await asIdentityAtOnce(db, ANON, [{ sql: WHO, params: [] }]);
    expect(plain[0]!.rows).toEqual([{ uid: null, role: 'anon', who: 'basalt_anon' }]);
    const after = await Promise.all(Array.from({ length: 8 }, () => db.query(WHO)));
    for (const x of after) expect(x.rows[0]).toEqual({ uid: null, role: null, who: 'postgres' });
  });

  test('a statement failing in the middle of a batch: nothing of it stays, and the next user is clean', async () => {
    // One connection (external) or the one session (embedded): the next statement runs where the batch failed.
    const one = engine === 'external' ? await openDb({ url: f.url, dataDir: f.dataDir, poolMax: 1 }) : db;
    try {
      for (const params of [['%'], [true]]) {
        const failed = await asIdentityAtOnce(one, userIdentity(ALICE, { sub: ALICE }), [
          { sql: "INSERT INTO notes (body) VALUES ('half a batch')", params: [] },
          { sql: 'SELECT 1 / 0 AS x WHERE $1::text IS NOT NULL', params },
          { sql: WHO, params: [] },
        ]).catch((e) => e);
        expect(failed).toBeInstanceOf(PgError);
        expect((failed as PgError).code).toBe('22012');
        expect((await one.query(WHO)).rows).toEqual([{ uid: null, role: null, who: 'postgres' }]);
        // On external PostgreSQL a batch of plain values has connections of its own (src/db/external-wire.ts):
        // the one the batch failed on is clean too.
        expect((await one.atOnce([{ sql: WHO, params: [] }]))[0]!.rows).toEqual([
          { uid: null, role: null, who: 'postgres' },
        ]);
        expect((await one.query("SELECT 1 FROM notes WHERE body = 'half a batch'")).rowCount).toBe(0);
        const [bob, rows] = await asIdentityAtOnce(one, userIdentity(BOB, { sub: BOB }), [
          { sql: WHO, params: [] },
          { sql: 'SELECT DISTINCT owner_id::text AS owner FROM notes', params: [] },
        ]);
        expect(bob!.rows).toEqual([{ uid: BOB, role: 'user', who: 'basalt_user' }]);
        expect(rows!.rows).toEqual([{ owner: BOB }]);
      }
    } finally {
      if (one !== db) await one.close();
    }
  });

  test('statements sent at once answer in the shape of the schema now, however often they ran before', async () => {
    await db.exec(`CREATE TABLE shapes (id int PRIMARY KEY, a text);
      GRANT SELECT ON shapes TO basalt_user; INSERT INTO shapes VALUES (1, 'x');`);
    // The embedded engine keeps them prepared in its session: a changed shape, or a statement
    // the session no longer has, makes the request run once more with the statement parsed anew.
    const read = async () =>
      (
        await asIdentityAtOnce(db, userIdentity(ALICE, {}), [
          { sql: 'SELECT * FROM shapes WHERE id = $1', params: ['1'] },
        ])
      )[0]!.rows;
    for (let i = 0; i < 7; i++) expect(await read()).toEqual([{ id: 1, a: 'x' }]);
    await db.exec("ALTER TABLE shapes ADD COLUMN b text DEFAULT 'y'");
    expect(await read()).toEqual([{ id: 1, a: 'x', b: 'y' }]);
    await db.exec('ALTER TABLE shapes ALTER COLUMN a TYPE int USING length(a)');
    expect(await read()).toEqual([{ id: 1, a: 1, b: 'y' }]);
    await db.exec('DEALLOCATE ALL');
    expect(await read()).toEqual([{ id: 1, a: 1, b: 'y' }]);
    await db.exec('REVOKE SELECT ON shapes FROM basalt_user');
    const refused = await read().catch((e) => e);
    expect((refused as PgError).code).toBe('42501');
  });

  test('the session keeps at most 64 batch statements prepared: the least recently used is closed, and parsed again when it comes back', async () => {
    // The statements a batch's session holds: the embedded engine's one session, or (external)
    // the batches' own connection, read by a batch on it (one at a time here, so the same one).
    const HELD =
      "SELECT statement AS sql FROM pg_prepared_statements WHERE name LIKE 'basalt_batch_%' OR name LIKE 'basalt_wire_%'";
    const prepared = async () =>
      (engine === 'embedded'
        ? (await db.query<{ sql: string }>(HELD)).rows
        : ((await db.atOnce([{ sql: HELD, params: [] }]))[0]!.rows as { sql: string }[])
      ).map((r) => r.sql);
    const text = (i: number) => `SELECT ${i} AS n WHERE $1::text IS NOT NULL`;
    const run = async (i: number) => (await db.atOnce([{ sql: text(i), params: ['x'] }]))[0]!.rows;
    for (let i = 0; i < 70; i++) expect(await run(i)).toEqual([{ n: i }]);
    let held = await prepared();
    expect(held.length).toBeLessThanOrEqual(64);
    expect(held).toContain(text(69));
    expect(held).not.toContain(text(0)); // the least recently used went first
    expect(await run(0)).toEqual([{ n: 0 }]);
    held = await prepared();
    expect(held).toContain(text(0));
    expect(held.length).toBeLessThanOrEqual(64);
  });

  test('assumeIdentity inside an open transaction lasts until it ends', async () => {
    const tx = await db.begin();
    await assumeIdentity(tx, userIdentity(ALICE, {}));
    expect((await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM notes')).rows[0]!.n).toBe(1);
    await tx.rollback();
    expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM notes')).rows[0]!.n).toBe(3);
  });
});

describe.skipIf(!ADMIN_URL)('batches on external PostgreSQL (src/db/external-wire.ts)', () => {
  let f: FreshDb;
  let db: Db;
  const WHO = 'SELECT basalt.uid() AS uid, basalt.role() AS role, current_user AS who';
  beforeAll(async () => {
    f = await freshDb('external');
    db = await openDb({ url: f.url, dataDir: f.dataDir, poolMax: 1 });
    await migratePlatform(db);
  });
  afterAll(async () => {
    await db.close();
    await f.drop();
  });

  test('values come back as on the driver: each type as the engine returns it', async () => {
    const sql = `SELECT 9007199254740993::int8 AS big, 1.50::numeric AS num, 2::int4 AS i, 1.5::float8 AS f,
      true AS b, 'x'::text AS t, NULL::text AS n, '2026-01-02T03:04:05Z'::timestamptz AS ts, '2026-01-02'::date AS d,
      '{"a":[1]}'::jsonb AS j, '\\x0102'::bytea AS bytes, ARRAY[1,2]::int4[] AS ints, ARRAY['a',NULL]::text[] AS texts,
      gen_random_uuid() IS NOT NULL AS u, $1::int8 AS p1, $2::text AS p2, 1 AS same, 2 AS same`;
    const params = ['12', 'é'];
    const driver = await db.query(sql, params);
    const [batch] = await db.atOnce([{ sql, params }]);
    expect(batch!.rows).toEqual(driver.rows);
    expect(batch!.fields).toEqual(driver.fields);
    expect(batch!.rows[0]!.bytes).toBeInstanceOf(Uint8Array);
    expect(batch!.rows[0]!.ts).toBeInstanceOf(Date);
    const [written] = await db.atOnce([{ sql: 'CREATE TEMP TABLE IF NOT EXISTS w (a int)', params: [] }]);
    expect(written!.rowCount).toBe(0);
  });

  test("a batch's connection dropped mid-batch: database unavailable, nothing stays, the next batch is clean", async () => {
    await db.exec('CREATE TABLE IF NOT EXISTS dropped (body text)');
    const admin = postgres(f.url, { max: 1, onnotice: () => {} });
    try {
      const sent = db
        .atOnce([
          { sql: "SELECT set_config('basalt.uid', $1, true)", params: [crypto.randomUUID()] },
          { sql: "INSERT INTO dropped VALUES ('mid-batch')", params: [] },
          { sql: 'SELECT pg_sleep(30), $1::text AS marker', params: ['basalt-dropped-batch'] },
        ])
        .catch((e) => e);
      for (let i = 0; i < 100; i++) {
        const killed = await admin.unsafe(
          `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
            WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep(30)%'`,
        );
        if (killed.length) break;
        await Bun.sleep(20);
      }
      const failed = await sent;
      expect(failed).toBeInstanceOf(DatabaseUnavailableError);
      expect((await db.query('SELECT count(*)::int AS n FROM dropped')).rows).toEqual([{ n: 0 }]);
      const [who] = await db.atOnce([{ sql: WHO, params: [] }]);
      expect(who!.rows).toEqual([{ uid: null, role: null, who: 'postgres' }]);
      const [bob] = await asIdentityAtOnce(db, userIdentity(BOB, { sub: BOB }), [{ sql: WHO, params: [] }]);
      expect(bob!.rows).toEqual([{ uid: BOB, role: 'user', who: 'basalt_user' }]);
    } finally {
      await admin.end();
    }
  });

  test('sslmode=prefer against a server without TLS: the batches go on without it, on their own connection', async () => {
    const { openExternal } = await import('../../src/db/external');
    const u = new URL(f.url);
    u.searchParams.set('sslmode', 'prefer');
    const prefer = await openExternal(u.toString(), { max: 1, connection: { application_name: 'basalt-prefer' } });
    try {
      const [who] = await asIdentityAtOnce(prefer, userIdentity(BOB, { sub: BOB }), [{ sql: WHO, params: [] }]);
      expect(who!.rows).toEqual([{ uid: BOB, role: 'user', who: 'basalt_user' }]);
      // The driver's connection and the batches' own.
      const n = await prefer.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'basalt-prefer'",
      );
      expect(n.rows[0]!.n).toBe(2);
    } finally {
      await prefer.close();
    }
  });

  test("the pool's run-time parameters apply (statement_timeout), and its wait gate bounds the batches", async () => {
    const { openExternal } = await import('../../src/db/external');
    const timed = await openExternal(f.url, {
      max: 1,
      connection: { statement_timeout: '200', application_name: 'basalt-timed' },
    });
    try {
      const slow = await timed.atOnce([{ sql: 'SELECT pg_sleep($1)', params: [2] }]).catch((e) => e);
      expect((slow as PgError).code).toBe('57014');
      const before = timed.waits.waited;
      const both = await Promise.all([0, 1].map(() => timed.atOnce([{ sql: 'SELECT pg_sleep(0.05)', params: [] }])));
      expect(both).toHaveLength(2);
      expect(timed.waits.waited).toBe(before + 1);
      // One connection in use at a time: the batches' connection and the driver's, never more than the pool's size each.
      const n = await timed.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'basalt-timed'",
      );
      expect(n.rows[0]!.n).toBeLessThanOrEqual(2);
    } finally {
      await timed.close();
    }
  });
});

describe.skipIf(!ADMIN_URL)('roles are cluster-wide (external PostgreSQL)', () => {
  test('several databases migrate at once; the roles are made once and shared', async () => {
    const dbs = await Promise.all([0, 1, 2].map(() => freshDb('external')));
    try {
      const opened = await Promise.all(dbs.map((d) => openDb({ url: d.url, dataDir: d.dataDir, poolMax: 2 })));
      try {
        await Promise.all(opened.map((d) => migratePlatform(d)));
        for (const [i, d] of opened.entries()) expect(await support(d, dbs[i]!.url)).toEqual({ ok: true });
      } finally {
        await Promise.all(opened.map((d) => d.close()));
      }
    } finally {
      await Promise.all(dbs.map((d) => d.drop()));
    }
  });

  test('a platform role that may not switch to the roles is reported, not a failed start', async () => {
    const f = await freshDb('external');
    const role = `basalt_test_plain_${crypto.randomUUID().slice(0, 8)}`;
    const admin = postgres(f.url, { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(
        `CREATE ROLE ${role} LOGIN PASSWORD 'pw'; GRANT ALL ON DATABASE ${new URL(f.url).pathname.slice(1)} TO ${role}; GRANT CREATE ON SCHEMA public TO ${role}`,
      );
      const u = new URL(f.url);
      u.username = role;
      u.password = 'pw';
      const db = await openDb({ url: u.toString(), dataDir: f.dataDir, poolMax: 2 });
      try {
        await migratePlatform(db);
        const s = await support(db, u.toString());
        expect(s.ok).toBe(false);
        expect((s as { reason: string }).reason).toContain('may not create or update role basalt_auth_');
        // What a managed server's operator does instead: an authenticator of their own, named in database.user_url.
        await admin.unsafe(
          `GRANT basalt_anon, basalt_user TO ${role}; CREATE ROLE ${role}_auth LOGIN NOINHERIT PASSWORD 'pw'; GRANT basalt_anon, basalt_user TO ${role}_auth`,
        );
        const auth = new URL(u);
        auth.username = `${role}_auth`;
        expect(await support(db, u.toString(), auth.toString())).toEqual({ ok: true });
        // One that could become the platform's role is refused.
        await admin.unsafe(`GRANT ${role} TO ${role}_auth`);
        const refused = await support(db, u.toString(), auth.toString());
        expect((refused as { reason: string }).reason).toContain(`can become the platform's role ${role}`);
      } finally {
        await db.close();
      }
    } finally {
      await admin.unsafe(`DROP OWNED BY ${role}`).catch(() => {});
      await admin.end();
      await f.drop();
      const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
      await a.unsafe(`DROP ROLE IF EXISTS ${role}_auth`).catch(() => {});
      await a.unsafe(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
      await a.end();
    }
  });
});
