import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES, ADMIN_URL, freshDb, type FreshDb } from '../helpers/engines';
import { openDb } from '../../src/db/open';
import { migratePlatform, migrateDir, MigrationError } from '../../src/db/migrate';
import { platformAt } from '../helpers/platform-at';
import { DatabaseBusyError, PgError, type Db } from '../../src/db/engine';
import { openPlatform } from '../../src/platform';
import { DataDirLockedError } from '../../src/db/datadir-lock';
import { eventually } from '../helpers/wait';
import { heapStats } from 'bun:jsc';

async function open(f: FreshDb): Promise<Db> {
  const db = await openDb({ url: f.url, dataDir: f.dataDir });
  await migratePlatform(db);
  return db;
}

describe.each(ENGINES)('storage engine: %s', (engine) => {
  let f: FreshDb;
  let db: Db;
  beforeAll(async () => {
    f = await freshDb(engine);
    db = await open(f);
  });
  afterAll(async () => {
    await db.close();
    await f.drop();
  });

  test('values have one representation on both engines', async () => {
    const { rows, fields } = await db.query(
      `SELECT 1::int4 AS i, 9007199254740993::int8 AS big, 12345678901234567890.123456789::numeric AS num, 1.5::float8 AS f,
              true AS b, '{"a":[1,null]}'::jsonb AS j, '2026-01-02T03:04:05.678Z'::timestamptz AS ts,
              '\\x00ff10'::bytea AS bin, ARRAY[1,2,3]::int4[] AS arr, '6f1c1f36-58d5-4bc6-b1a4-7a9f6b5a1c11'::uuid AS u, NULL::text AS n`,
    );
    const r = rows[0]!;
    expect(r.i).toBe(1);
    expect(r.big).toBe('9007199254740993');
    expect(r.num).toBe('12345678901234567890.123456789');
    expect(r.f).toBe(1.5);
    expect(r.b).toBe(true);
    expect(r.j).toEqual({ a: [1, null] });
    expect(r.ts).toBeInstanceOf(Date);
    expect((r.ts as Date).toISOString()).toBe('2026-01-02T03:04:05.678Z');
    expect(r.bin).toBeInstanceOf(Uint8Array);
    expect([...(r.bin as Uint8Array)]).toEqual([0, 255, 16]);
    expect(r.arr).toEqual([1, 2, 3]);
    expect(r.u).toBe('6f1c1f36-58d5-4bc6-b1a4-7a9f6b5a1c11');
    expect(r.n).toBeNull();
    expect(fields.map((x) => x.name)).toEqual(['i', 'big', 'num', 'f', 'b', 'j', 'ts', 'bin', 'arr', 'u', 'n']);
    expect(fields[1]!.typeId).toBe(20);
  });

  test('parameters are bound, JSON and bytea parameters included', async () => {
    await db.exec('CREATE TABLE public.t_params (id serial PRIMARY KEY, name text, doc jsonb, bin bytea)');
    const hostile = "x'); DROP TABLE public.t_params; --";
    const ins = await db.query('INSERT INTO public.t_params (name, doc, bin) VALUES ($1, $2::jsonb, $3) RETURNING id', [
      hostile,
      JSON.stringify({ k: 'v' }),
      new Uint8Array([1, 2]),
    ]);
    expect(ins.rowCount).toBe(1);
    const { rows } = await db.query('SELECT name, doc, bin FROM public.t_params WHERE id = $1', [ins.rows[0]!.id]);
    expect(rows[0]).toEqual({ name: hostile, doc: { k: 'v' }, bin: new Uint8Array([1, 2]) });
    const upd = await db.query('UPDATE public.t_params SET name = $1', ['y']);
    expect(upd.rowCount).toBe(1);
  });

  test('Postgres errors carry SQLSTATE and column, not SQL text', async () => {
    await db.exec('CREATE TABLE public.t_err (id int PRIMARY KEY, v text NOT NULL)');
    await db.query('INSERT INTO public.t_err VALUES (1, $1)', ['a']);
    const dup = await db.query('INSERT INTO public.t_err VALUES (1, $1)', ['b']).catch((e) => e);
    expect(dup).toBeInstanceOf(PgError);
    expect(dup.code).toBe('23505');
    expect(dup.detail.constraint).toBe('t_err_pkey');
    const nn = await db.query('INSERT INTO public.t_err VALUES (2, NULL)').catch((e) => e);
    expect(nn.code).toBe('23502');
    expect(nn.detail.column).toBe('v');
  });

  test('a transaction spans calls: commit keeps, rollback discards', async () => {
    await db.exec('CREATE TABLE public.t_tx (v int)');
    const a = await db.begin();
    await a.query('INSERT INTO public.t_tx VALUES (1)');
    expect((await a.query('SELECT count(*)::int AS c FROM public.t_tx')).rows[0]!.c).toBe(1);
    await a.commit();
    expect(a.closed).toBe(true);
    const b = await db.begin();
    await b.query('INSERT INTO public.t_tx VALUES (2)');
    await b.rollback();
    expect((await db.query('SELECT array_agg(v) AS v FROM public.t_tx')).rows[0]!.v).toEqual([1]);
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO public.t_tx VALUES (3)');
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect((await db.query('SELECT count(*)::int AS c FROM public.t_tx')).rows[0]!.c).toBe(1);
  });

  test('setup statements run inside the transaction', async () => {
    const tx = await db.begin({ setup: ["SET LOCAL statement_timeout = '1234ms'"] });
    expect((await tx.query('SHOW statement_timeout')).rows[0]).toEqual({ statement_timeout: '1234ms' });
    await tx.rollback();
  });

  test('LISTEN/NOTIFY delivers payloads', async () => {
    const got: string[] = [];
    const unlisten = await db.listen('basalt_test_channel', (p) => got.push(p));
    await db.notify('basalt_test_channel', 'hello');
    await eventually(() => got.length > 0, { timeout: 1000, interval: 10, what: 'the notification' });
    expect(got).toEqual(['hello']);
    await unlisten();
  });

  test('a NOTIFY inside a transaction arrives once, at commit', async () => {
    const channel = 'basalt_test_tx_channel';
    const got: string[] = [];
    const unlisten = await db.listen(channel, (p) => got.push(p));
    const arrived = (payload: string) =>
      eventually(() => got.includes(payload), { timeout: 5000, interval: 10, what: `the notification ${payload}` });
    // Sentinels on the same channel, sent after the notification that must not have arrived yet:
    // a listener gets notifications in commit order, so one already committed would come first.
    await db.transaction(async (tx) => {
      await tx.query('SELECT pg_notify($1, $2)', [channel, 'in-tx']);
      if (engine === 'external') {
        // Committed now by another connection of the pool.
        await db.query('SELECT pg_notify($1, $2)', [channel, 'outside']);
        await arrived('outside');
        expect(got).toEqual(['outside']);
      } else {
        // The one session: a notification reaches the listeners as the answer carrying it is read,
        // so one committed by the statement above would be here once the next statement answered.
        await tx.query('SELECT 1');
        expect(got).toEqual([]);
      }
    });
    await db.query('SELECT pg_notify($1, $2)', [channel, 'after']);
    await arrived('after');
    expect(got).toEqual([...(engine === 'external' ? ['outside'] : []), 'in-tx', 'after']);
    await unlisten();
  });

  test('a statement refused while parsing or binding leaves the session usable', async () => {
    const syntax = await db.query('SELEC $1', ['x']).catch((e) => e);
    expect(syntax).toBeInstanceOf(PgError);
    expect(syntax.code).toBe('42601');
    const int = await db.query('SELECT $1::int4 AS n', ['x']).catch((e) => e);
    expect(int).toBeInstanceOf(PgError);
    expect(int.code).toBe('22P02');
    if (engine === 'embedded') {
      // Refused by PGlite's serializer for the parameter's type, after the statement was parsed.
      const bool = await db.query('SELECT $1::boolean AS b', ['maybe']).catch((e) => e);
      expect(bool).toBeInstanceOf(Error);
    }
    const ok = await db.query<{ b: boolean; n: number }>('SELECT $1::boolean AS b, $2::int4 AS n', [true, 7]);
    expect(ok.rows).toEqual([{ b: true, n: 7 }]);
    const tx = await db.begin();
    await expect(tx.query('SELECT $1::int4 / 0', [1])).rejects.toBeInstanceOf(PgError);
    await tx.rollback();
    expect((await db.query('SELECT 2 AS two')).rows).toEqual([{ two: 2 }]);
  });

  test.if(engine === 'embedded')('embedded statements leave no ArrayBuffer behind', async () => {
    // PGlite's own query path left ~60 per 10-row select (docs/bench/2026-11-25-embedded-engine-under-load.md).
    await db.exec(
      'CREATE TABLE public.t_buffers AS SELECT g AS id, g % 10 AS grp, md5(g::text) AS name FROM generate_series(1, 1000) g',
    );
    const count = () => heapStats().objectTypeCounts.ArrayBuffer ?? 0;
    Bun.gc(true);
    const before = count();
    for (let i = 0; i < 500; i++) {
      const r = await db.query('SELECT id, grp, name FROM public.t_buffers WHERE grp = $1 LIMIT 10', [i % 10]);
      expect(r.rows).toHaveLength(10);
    }
    expect(count() - before).toBeLessThan(100);
  });

  test('upgrading past 080: live idempotency records move onto their jobs, the record table goes', async () => {
    const old = await freshDb(engine);
    const odb = await openDb({ url: old.url, dataDir: old.dataDir });
    try {
      // The schema as 070 left it, with a live record (async), a live sync record, an expired one.
      await platformAt(odb, '070_admin');
      const jobs = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
      const keys = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
      for (const [i, id] of jobs.entries()) {
        await odb.query(
          `INSERT INTO basalt.mail_jobs (id, key_id, state, sync, recipients, subject, text, message_id, max_attempts)
           VALUES ($1, 'k1', $2, $3, ARRAY['a@example.com'], 's', 't', 'm', 1)`,
          [id, i === 1 ? 'sent' : 'queued', i === 1],
        );
        await odb.query(
          `INSERT INTO basalt.mail_idempotency (key_scope, idem_key, request_hash, status, response, locked_until, expires_at)
           VALUES ('k1', $1, $2, $3, $4::jsonb, now(), now() + $5::interval)`,
          [keys[i], `hash-${i}`, i === 1 ? 200 : 202, JSON.stringify({ job_id: id }), i === 2 ? '-1 hour' : '23 hours'],
        );
      }
      expect(await migratePlatform(odb)).toContain('080_mail_keys_on_jobs');
      const { rows } = await odb.query<{ id: string; idem_key: string | null; idem_hash: string | null }>(
        'SELECT id, idem_key, idem_hash FROM basalt.mail_jobs',
      );
      const byId = Object.fromEntries(rows.map((r) => [r.id, r]));
      expect(byId[jobs[0]!]).toMatchObject({ idem_key: keys[0], idem_hash: 'hash-0' });
      expect(byId[jobs[1]!]).toMatchObject({ idem_key: keys[1], idem_hash: 'hash-1' });
      expect(byId[jobs[2]!]).toMatchObject({ idem_key: null, idem_hash: null });
      expect((await odb.query("SELECT to_regclass('basalt.mail_idempotency') AS t")).rows[0]).toEqual({ t: null });
    } finally {
      await odb.close();
      await old.drop();
    }
  });

  test('operator migrations apply once, in name order, and a failing file is named', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basalt-mig-'));
    writeFileSync(join(dir, '002_rows.sql'), "INSERT INTO m_items (name) VALUES ('second-file')");
    writeFileSync(join(dir, '001_table.sql'), 'CREATE TABLE m_items (id serial PRIMARY KEY, name text NOT NULL)');
    writeFileSync(join(dir, 'notes.txt'), 'not sql');
    expect(await migrateDir(db, dir)).toEqual(['001_table.sql', '002_rows.sql']);
    expect(await migrateDir(db, dir)).toEqual([]);
    expect((await db.query('SELECT name FROM public.m_items')).rows).toEqual([{ name: 'second-file' }]);
    writeFileSync(join(dir, '003_bad.sql'), 'CREATE TABLE m_more (id int); INSERT INTO nowhere VALUES (1)');
    const err = await migrateDir(db, dir).catch((e) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect(err.message).toContain('003_bad.sql');
    expect(err.message).toContain('nowhere');
    // The failing file ran in a transaction: nothing of it remains, and it is not recorded.
    expect((await db.query("SELECT to_regclass('public.m_more') AS t")).rows[0]!.t).toBeNull();
    expect((await db.query('SELECT name FROM basalt.schema_migrations ORDER BY name')).rows.map((r) => r.name)).toEqual(
      ['001_table.sql', '002_rows.sql'],
    );
  });
});

describe('embedded data dir ownership', () => {
  test('a second opener fails at once naming the holder; the dir is free after close', async () => {
    const f = await freshDb('embedded');
    const first = await openDb({ url: '', dataDir: f.dataDir });
    try {
      const lock = JSON.parse(readFileSync(join(f.dataDir, 'basalt.lock'), 'utf8'));
      expect(lock.pid).toBe(process.pid);
      // Simulate another live process holding it: the parent of this test process is alive.
      writeFileSync(join(f.dataDir, 'basalt.lock'), JSON.stringify({ ...lock, pid: process.ppid }));
      const err = await openDb({ url: '', dataDir: f.dataDir }).catch((e) => e);
      expect(err).toBeInstanceOf(DataDirLockedError);
      expect(err.message).toContain(`basalt process ${process.ppid}`);
      expect(err.message).toContain(f.dataDir);
      writeFileSync(join(f.dataDir, 'basalt.lock'), JSON.stringify(lock));
    } finally {
      await first.close();
    }
    expect(existsSync(join(f.dataDir, 'basalt.lock'))).toBe(false);
    const again = await openDb({ url: '', dataDir: f.dataDir });
    await again.close();
    await f.drop();
  });

  test('a lock left by a dead process is taken over', async () => {
    const f = await freshDb('embedded');
    writeFileSync(
      join(f.dataDir, 'basalt.lock'),
      JSON.stringify({ pid: 2 ** 22 - 7, host: (await import('node:os')).hostname(), started: 'earlier' }),
    );
    const db = await openDb({ url: '', dataDir: f.dataDir });
    await db.close();
    await f.drop();
  });
});

describe.skipIf(!ADMIN_URL)('external engine', () => {
  test('an uncommitted transaction is invisible to other connections', async () => {
    const f = await freshDb('external');
    const db = await open(f);
    try {
      await db.exec('CREATE TABLE public.iso (v int)');
      const tx = await db.begin();
      await tx.query('INSERT INTO public.iso VALUES (1)');
      expect((await db.query('SELECT count(*)::int AS c FROM public.iso')).rows[0]!.c).toBe(0);
      await tx.commit();
      expect((await db.query('SELECT count(*)::int AS c FROM public.iso')).rows[0]!.c).toBe(1);
    } finally {
      await db.close();
      await f.drop();
    }
  });

  test('several instances migrate one database at once without conflict', async () => {
    const f = await freshDb('external');
    try {
      const ps = await Promise.all(
        [1, 2, 3].map(() => openPlatform({ env: { ...f.env, BASALT_LOG_LEVEL: 'silent' } })),
      );
      const { rows } = await ps[0]!.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM basalt.platform_migrations WHERE name = $1',
        ['001_core'],
      );
      expect(rows[0]!.n).toBe(1);
      await Promise.all(ps.map((p) => p.shutdown()));
    } finally {
      await f.drop();
    }
  });
});

describe('embedded engine: a first LISTEN while a transaction holds the session', () => {
  test('waits within the busy timeout (database busy), not without bound; subscribes once the session is free', async () => {
    const f = await freshDb('embedded');
    const db = await openDb({ url: '', dataDir: f.dataDir, busyTimeoutMs: () => 300 });
    try {
      let release!: () => void;
      const hold = new Promise<void>((r) => (release = r));
      const held = db.transaction(() => hold);
      await Bun.sleep(50);
      const t0 = performance.now();
      const err = await db
        .listen('basalt_test_busy', () => {})
        .then(
          () => undefined,
          (e) => e,
        );
      expect(err).toBeInstanceOf(DatabaseBusyError);
      expect(performance.now() - t0).toBeLessThan(2000);
      release();
      await held;
      const unlisten = await db.listen('basalt_test_busy', () => {});
      await unlisten();
    } finally {
      await db.close();
      await f.drop();
    }
  });
});
