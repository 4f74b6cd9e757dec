/**
 * The JS client (clients/js, docs/client.md) as a page gets it: the module served at
 * /api/client.js, imported into this process and run against the server, on both engines.
 * Expiry with a 10 s access token and eight concurrent calls (one refresh, all answered),
 * on the pre-emptive path and on the 401 token_expired path; a refused refresh signing out;
 * realtime across a server restart (reconnection with Last-Event-ID); a transaction; files;
 * OR groups, expand and aggregates as the server answers them; one BasaltError from envelopes
 * A, B and C.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { freePort } from '../helpers/binary';
import { startServer, type TestServer } from '../helpers/server';
import { eventually } from '../helpers/wait';
import { userEmail, USER_PASSWORD } from '../helpers/users';
import { REPO_EXTENSIONS } from '../extensions/support';

type ClientModule = typeof import('../../clients/js/src/client');

const NOTES = `
CREATE TABLE notes (
  id bigserial PRIMARY KEY,
  owner_id uuid NOT NULL DEFAULT basalt.uid(),
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON notes TO basalt_user;
GRANT USAGE ON SEQUENCE notes_id_seq TO basalt_user;
CREATE POLICY own ON notes FOR ALL TO basalt_user USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
SELECT basalt.realtime_enable('notes');
CREATE TABLE tags (
  id bigserial PRIMARY KEY,
  owner_id uuid NOT NULL DEFAULT basalt.uid(),
  note_id bigint NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
  label text NOT NULL
);
ALTER TABLE tags ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT ON tags TO basalt_user;
GRANT USAGE ON SEQUENCE tags_id_seq TO basalt_user;
CREATE POLICY own ON tags FOR ALL TO basalt_user USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
`;

/** The module exactly as served, written to a file and imported. */
async function served(s: TestServer): Promise<ClientModule> {
  const res = await fetch(`${s.publicUrl}/api/client.js`);
  expect(res.status).toBe(200);
  const file = join(mkdtempSync(join(tmpdir(), 'basalt-client-')), 'client.js');
  writeFileSync(file, await res.text());
  return import(file);
}

/** A fetch that counts calls to POST /api/v1/auth/refresh. */
function counting() {
  const counts = { refresh: 0 };
  const f = ((input: RequestInfo | URL, init?: RequestInit) => {
    if (String(input).endsWith('/api/v1/auth/refresh')) counts.refresh++;
    return fetch(input, init);
  }) as typeof fetch;
  return { counts, fetch: f };
}

describe.each(ENGINES)('the JS client against the server on %s', (engine) => {
  let db: FreshDb;
  let s: TestServer;
  let m: ClientModule;
  let port: number;
  const start = () =>
    startServer(engine, {
      db,
      migrations: { '001_notes.sql': NOTES },
      env: {
        BASALT_EXTENSIONS_DIR: REPO_EXTENSIONS,
        BASALT_WEB_PORT: String(port),
        BASALT_AUTH_RATE_LIMIT_REGISTER_PER_IP: '1000',
      },
    });

  beforeAll(async () => {
    db = await freshDb(engine);
    port = await freePort();
    s = await start();
    // Stored in the database (as an operator would set it live): it outlasts the restart below.
    await s.settings.set('auth.access_token_seconds', 10);
    m = await served(s);
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
    await db?.drop();
  });

  const client = (o: Parameters<ClientModule['createClient']>[1] = {}) => m.createClient(s.publicUrl, o);
  const signedUp = async (o: Parameters<ClientModule['createClient']>[1] = {}) => {
    const b = client(o);
    await b.auth.signUp({ email: userEmail('client'), password: USER_PASSWORD });
    expect(b.auth.user).not.toBeNull();
    return b;
  };

  test('the module and its declarations: ETag, gzip, cache headers, any origin, within 12 KB gzipped', async () => {
    const js = await fetch(`${s.publicUrl}/api/client.js`, {
      headers: { 'accept-encoding': 'gzip', origin: 'https://app.example' },
    });
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('content-encoding')).toBe('gzip');
    expect(js.headers.get('access-control-allow-origin')).toBe('*');
    expect(js.headers.get('cache-control')).toBe('public, max-age=300');
    expect(Bun.gzipSync(await js.text(), { level: 9 }).length).toBeLessThanOrEqual(12 * 1024);
    const etag = js.headers.get('etag')!;
    expect(etag).toMatch(/^".+"$/);
    const again = await fetch(`${s.publicUrl}/api/client.js`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);

    const dts = await fetch(`${s.publicUrl}/api/client.d.ts`);
    expect(dts.status).toBe(200);
    const text = await dts.text();
    expect(text).toContain('export declare function createClient<DB extends DatabaseShape = UntypedDB>');
    expect(text).toContain('export declare class BasaltError');
  });

  test('token lifetimes are live settings: auth.access_token_seconds (at least 10), auth.refresh_token_seconds', async () => {
    await s.settings.set('auth.refresh_token_seconds', 3600);
    try {
      const r = await fetch(`${s.publicUrl}/api/v1/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: userEmail('lifetimes'), password: USER_PASSWORD }),
      });
      const { data } = await r.json();
      expect([data.expires_in, data.refresh_expires_in]).toEqual([10, 3600]);
      const claims = JSON.parse(Buffer.from(data.access_token.split('.')[1], 'base64url').toString());
      expect(claims.exp - claims.iat).toBe(10);
      await expect(s.settings.set('auth.access_token_seconds', 9)).rejects.toThrow(/from 10 to/);
    } finally {
      await s.settings.unset('auth.refresh_token_seconds');
    }
  });

  test('an expired 10 s token: eight concurrent calls, one refresh, all answered (both paths)', async () => {
    // Pre-emptive: the client sees the token expire and refreshes before calling.
    const early = counting();
    const a = await signedUp({ storage: 'memory', fetch: early.fetch });
    await a.from('notes').insert({ body: 'a note' });
    // A second client whose stored session claims the token is good for an hour: it learns
    // otherwise from the server's 401 token_expired.
    const late = counting();
    const b0 = await signedUp({ storage: 'memory' });
    // A third whose session is ended elsewhere: its refresh is refused and it signs out.
    const c = await signedUp({ storage: 'memory' });
    const events: string[] = [];
    c.auth.onChange((e) => events.push(e));
    const session = (c.auth as unknown as { session: { access_token: string } }).session;
    const ended = await fetch(`${s.publicUrl}/api/v1/auth/logout`, {
      method: 'POST',
      headers: { authorization: `Bearer ${session.access_token}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(ended.status).toBe(200);

    // The point is time passing: the 10 s tokens expire.
    await Bun.sleep(10_500);
    const stored = (b0.auth as unknown as { session: Record<string, unknown> }).session;
    const kept = new Map([
      [`basalt.session:${s.publicUrl}`, JSON.stringify({ ...stored, expires_at: Date.now() + 3_600_000 })],
    ]);
    const b = client({
      fetch: late.fetch,
      storage: {
        get: (k) => kept.get(k) ?? null,
        set: (k, v) => void kept.set(k, v),
        remove: (k) => void kept.delete(k),
      },
    });

    const [ra, rb] = await Promise.all([
      Promise.all(Array.from({ length: 8 }, () => a.from('notes').select(['body']))),
      Promise.all(Array.from({ length: 8 }, () => b.from('notes').select(['id']))),
    ]);
    for (const r of ra) expect(r.rows).toEqual([{ body: 'a note' }]);
    for (const r of rb) expect(r.rows).toEqual([]);
    expect(early.counts.refresh).toBe(1);
    expect(late.counts.refresh).toBe(1);
    expect(a.auth.user).not.toBeNull();

    const refused = await c
      .from('notes')
      .select()
      .then(
        () => null,
        (e: any) => e,
      );
    expect(refused).toBeInstanceOf(m.BasaltError);
    expect(refused.status).toBe(401);
    expect(refused.code).toBe('session_revoked');
    expect(c.auth.user).toBeNull();
    expect(events).toEqual(['signed_out']);
  }, 30_000);

  test('data: insert one and many, update, delete, filters, order, total; a transaction commits or rolls back', async () => {
    const a = await signedUp({ storage: 'memory' });
    const rows = (await a.from('notes').insert([{ body: 'one' }, { body: 'two' }, { body: 'three' }])).rows;
    expect(rows.map((r) => r.body)).toEqual(['one', 'two', 'three']);
    const page = await a
      .from('notes')
      .select(['body'], { total: true })
      .neq('body', 'two')
      .order('id', 'desc')
      .limit(1);
    expect(page).toEqual({ rows: [{ body: 'three' }], count: 1, total: 2 });
    expect((await a.from('notes').select(['body']).in('body', ['one', 'two']).like('body', 't%')).rows).toEqual([
      { body: 'two' },
    ]);
    expect((await a.from('notes').update({ body: 'TWO' }).eq('id', rows[1]!.id)).rows[0]!.body).toBe('TWO');
    expect((await a.from('notes').delete(['id']).eq('id', rows[0]!.id)).count).toBe(1);

    const done = await a.transaction(async (tx) => {
      await tx.from('notes').insert({ body: 'in tx' });
      return (await tx.from('notes').select(['body']).eq('body', 'in tx')).count;
    });
    expect(done).toBe(1);
    const failed = await a
      .transaction(async (tx) => {
        await tx.from('notes').insert({ body: 'rolled back' });
        throw new Error('changed my mind');
      })
      .catch((e: Error) => e.message);
    expect(failed).toBe('changed my mind');
    expect((await a.from('notes').select(['body']).order('id')).rows.map((r) => r.body)).toEqual([
      'TWO',
      'three',
      'in tx',
    ]);
  });

  test('queries the server answers: an OR group, expand both ways, an aggregate grouped by a relation', async () => {
    const a = await signedUp({ storage: 'memory' });
    const other = await signedUp({ storage: 'memory' });
    const [n1, n2, n3] = (await a.from('notes').insert([{ body: 'red' }, { body: 'green' }, { body: 'blue' }])).rows;
    await a.from('tags').insert([
      { note_id: n1!.id, label: 'warm' },
      { note_id: n1!.id, label: 'bright' },
      { note_id: n3!.id, label: 'cold' },
    ]);
    await other.from('notes').insert({ body: 'red' });
    // OR within the user's own rows (row-level security still applies).
    const either = await a
      .from('notes')
      .select(['body'])
      .or((q) => q.eq('body', 'red').eq('body', 'blue'))
      .order('id');
    expect(either.rows).toEqual([{ body: 'red' }, { body: 'blue' }]);
    // One-to-many, narrowed and counted, and many-to-one back.
    const withTags = await a
      .from('notes')
      .select(['id', 'body'])
      .expand('tags_via_note_id', ['label'], (q) => q.order('label'))
      .order('id');
    expect(
      withTags.rows.map((r) => [r.body, (r.expand as { tags_via_note_id: { label: string }[] }).tags_via_note_id]),
    ).toEqual([
      ['red', [{ label: 'bright' }, { label: 'warm' }]],
      ['green', []],
      ['blue', [{ label: 'cold' }]],
    ]);
    const tag = await a.from('tags').select(['label']).expand('note_id', ['body']).eq('label', 'cold');
    expect(tag.rows).toEqual([{ label: 'cold', expand: { note_id: { body: 'blue' } } }]);
    // Tags per note body: a group across the relation, only the user's rows counted.
    const perNote = await a.from('tags').aggregate({ count: 'n' }).groupBy('note_id.body').order('n', 'desc');
    expect(perNote.rows).toEqual([
      { 'note_id.body': 'red', n: 2 },
      { 'note_id.body': 'blue', n: 1 },
    ]);
    expect(n2!.body).toBe('green');
  });

  test('one BasaltError from envelopes A, B and C', async () => {
    const b = client({ storage: 'memory' });
    // A: Public Auth.
    const a = await b.auth.signIn({ email: userEmail('nobody'), password: USER_PASSWORD }).catch((e: any) => e);
    expect(a).toBeInstanceOf(m.BasaltError);
    expect([a.status, a.code]).toEqual([401, 'invalid_credentials']);
    expect(a.message).toBeString();
    // A, with details: a bad value names its column.
    const u = await signedUp({ storage: 'memory' });
    const bad = await u
      .from('notes')
      .insert({ body: 'x', created_at: 'not a time' } as never)
      .then(null, (e: any) => e);
    expect([bad.status, bad.code, bad.details?.column]).toEqual([400, 'validation_error', 'created_at']);
    // B: the mail area (no key).
    const mail: any = await b.request('/api/v1/mail/send', { body: {} }).catch((e: any) => e);
    expect(mail).toBeInstanceOf(m.BasaltError);
    expect([mail.status, mail.code]).toEqual([401, 'unauthorized']);
    // C: the Files API (media-library), signed out.
    const files = await b.files.upload(new Blob(['hi'])).catch((e: any) => e);
    expect(files).toBeInstanceOf(m.BasaltError);
    expect([files.status, files.code]).toEqual([401, 'unauthorized']);
    // No answer at all.
    const down = await m
      .createClient(`http://127.0.0.1:${await freePort()}`, { storage: 'memory' })
      .from('notes')
      .select()
      .then(null, (e: any) => e);
    expect([down.status, down.code]).toEqual([0, 'network_error']);
  });

  test("the session's token and the public key go to this server only", async () => {
    const seen: { url: string; headers: Record<string, string> }[] = [];
    const f = ((input: RequestInfo | URL, init?: RequestInit) => {
      seen.push({ url: String(input), headers: { ...(init?.headers as Record<string, string>) } });
      if (String(input).startsWith(`${s.publicUrl}/`)) return fetch(input, init);
      return Promise.resolve(Response.json({ success: true, data: { elsewhere: true } }));
    }) as typeof fetch;
    const u = await signedUp({ storage: 'memory', fetch: f, publicKey: 'pk_test' });
    // Another origin, and a path that makes the server's URL the user part of another's.
    for (const url of ['https://elsewhere.example/hook', '@elsewhere.example/x'])
      expect(await u.request(url, { body: {} })).toEqual({ elsewhere: true });
    for (const r of seen.slice(-2)) {
      expect(r.headers.authorization).toBeUndefined();
      expect(r.headers['x-api-key']).toBeUndefined();
    }
    // Its own routes still carry them.
    await u.request('/api/v1/auth/me').catch(() => {});
    expect(seen.at(-1)!.headers.authorization).toStartWith('Bearer ');
  });

  test('files: upload with progress, url, read back', async () => {
    const u = await signedUp({ storage: 'memory' });
    const seen: number[] = [];
    const file = await u.files.upload(new Blob(['hello files']), {
      name: 'hello.txt',
      onProgress: (n) => seen.push(n),
    });
    expect(file.name).toBe('hello.txt');
    expect(seen.at(-1)).toBe(11);
    expect(u.files.url(file.id)).toBe(`${s.publicUrl}/api/v1/files/${file.id}/content`);
    expect(await (await u.files.get(file.id)).text()).toBe('hello files');
  });

  // Last: it restarts the server.
  test('realtime: live changes, reconnection across a server restart with Last-Event-ID, no token in the URL', async () => {
    const u = await signedUp({ storage: 'memory' });
    const urls: string[] = [];
    // Holds the stream's reconnection while set: the change made meanwhile must come by Last-Event-ID.
    let gate: Promise<void> | undefined;
    const watcher = m.createClient(s.publicUrl, {
      storage: 'memory',
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        urls.push(String(input));
        if (gate && String(input).includes('/realtime')) await gate;
        return fetch(input, init);
      }) as typeof fetch,
    });
    // The same user, signed in on a second client (a second tab with its own storage).
    await watcher.auth.signIn({ email: u.auth.user!.email, password: USER_PASSWORD });
    const got: { event: string; body?: unknown; id?: string }[] = [];
    const opened: number[] = [];
    const sub = watcher.realtime.subscribe(
      ['notes'],
      (e) => got.push(e.event === 'change' ? { event: e.event, id: e.id, body: e.row.body } : { event: e.event }),
      { onOpen: () => opened.push(Date.now()) },
    );
    try {
      await eventually(() => opened.length === 1, { what: 'the stream to open' });
      await u.from('notes').insert({ body: 'before' });
      await eventually(() => got.length === 1, { what: 'the first change' });

      let open!: () => void;
      gate = new Promise((resolve) => (open = resolve));
      await s.stop();
      s = await start();
      await u.from('notes').insert({ body: 'after' });
      const reopened = opened.length;
      open();
      gate = undefined;
      await eventually(() => got.length === 2, { what: 'the change after the restart', timeout: 20_000 });
      expect(opened.length).toBeGreaterThan(reopened);
      expect(got.map((g) => g.body)).toEqual(['before', 'after']);
      expect(Number(got[1]!.id)).toBeGreaterThan(Number(got[0]!.id));
      expect(opened.length).toBeGreaterThanOrEqual(2);
      // The token travels in a header only.
      for (const url of urls) expect(url).not.toMatch(/token|ticket|eyJ/);
    } finally {
      sub.close();
    }
  }, 40_000);
});
