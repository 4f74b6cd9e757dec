import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { eventually } from '../helpers/wait';
import { guardRoutes } from './guard-routes';
import { KEYS_CHANNEL, KeyService } from '../../src/modules/keys/service';
import { expectAError } from '../helpers/envelopes';

/** Ask `fn` again until it is true, for at most `ms`; returns the time it took. */
async function within(ms: number, fn: () => Promise<boolean>): Promise<number> {
  const start = Date.now();
  await eventually(fn, { timeout: ms, interval: 20 });
  return Date.now() - start;
}

/**
 * Wait until notices already sent (e.g. by an earlier test's revocation) have been
 * delivered, so they cannot land in the middle of the next scenario.
 */
async function settle(s: TestServer): Promise<void> {
  let got = false;
  const stop = await s.platform.db.listen('basalt_test_probe', () => void (got = true));
  await s.platform.db.notify('basalt_test_probe', 'x');
  await within(1000, async () => got);
  await stop();
}

describe.each(ENGINES)('API key guard on %s', (engine) => {
  let s: TestServer;
  const keys: Record<string, string> = {};
  const get = (path: string, key?: string) =>
    s.req('GET', path, { headers: key === undefined ? {} : { 'x-api-key': key } });
  const status = async (key: string | undefined, permission: string) =>
    (await get(`/api/v1/keys-test/require/${permission.replace(':', '-')}`, key)).status;

  beforeAll(async () => {
    s = await startServer(engine, { extra: [guardRoutes] });
    keys.public = await createKey(s, { type: 'public' });
    keys.mailSend = await createKey(s, { permissions: ['mail:send'] });
    keys.mailAll = await createKey(s, { permissions: ['mail:*'] });
    keys.dbQuery = await createKey(s, { permissions: ['db:query'], tables: ['orders'] });
    keys.dbAll = await createKey(s, { permissions: ['db:*'], tables: ['orders'] });
    keys.filesUp = await createKey(s, { permissions: ['files:upload'] });
    keys.filesDown = await createKey(s, { permissions: ['files:download'] });
    keys.filesAll = await createKey(s, { permissions: ['files:*'] });
    keys.everything = await createKey(s, { permissions: ['mail:*', 'db:*', 'files:*'], tables: ['orders'] });
  }, 60_000);
  afterAll(() => s.stop());

  // key → [any active key, mail:send, db:query, files:upload, files:download]
  const matrix: [string, number[]][] = [
    ['public', [200, 403, 403, 403, 403]],
    ['mailSend', [200, 200, 403, 403, 403]],
    ['mailAll', [200, 200, 403, 403, 403]],
    ['dbQuery', [200, 403, 200, 403, 403]],
    ['dbAll', [200, 403, 200, 403, 403]],
    ['filesUp', [200, 403, 403, 200, 403]],
    ['filesDown', [200, 403, 403, 403, 200]],
    ['filesAll', [200, 403, 403, 200, 200]],
    ['everything', [200, 200, 200, 200, 200]],
  ];
  test.each(matrix)('permission matching: %s key', async (name, expected) => {
    const got = [];
    for (const perm of ['any', 'mail:send', 'db:query', 'files:upload', 'files:download'])
      got.push(await status(keys[name]!, perm));
    expect(got).toEqual(expected);
  });

  test('403 names the missing permission, in the area envelope', async () => {
    const r = await get('/api/v1/keys-test/require/db-query', keys.mailSend);
    expectAError(r, 403, 'forbidden', { message: "This API key lacks the 'db:query' permission." });
  });

  const invalid: [string, () => string | undefined, string][] = [
    ['no header', () => undefined, 'This endpoint needs an API key in the X-API-Key header.'],
    ['empty header', () => '', 'This endpoint needs an API key in the X-API-Key header.'],
    ['garbage', () => 'hello', 'The API key is invalid, revoked or expired.'],
    ['well-formed but unknown', () => 'sk_' + 'A'.repeat(43), 'The API key is invalid, revoked or expired.'],
    [
      'service key presented as public',
      () => 'pk_' + keys.mailSend!.slice(3),
      'The API key is invalid, revoked or expired.',
    ],
    [
      'key with a character changed',
      () => keys.mailSend!.slice(0, -1) + (keys.mailSend!.endsWith('A') ? 'B' : 'A'),
      'The API key is invalid, revoked or expired.',
    ],
    ['key with a suffix', () => keys.mailSend + 'x', 'The API key is invalid, revoked or expired.'],
  ];
  test.each(invalid)('401 unauthorized: %s', async (_n, key, message) => {
    const r = await get('/api/v1/keys-test/require/any', key());
    expectAError(r, 401, 'unauthorized', { message });
  });

  test('surrounding whitespace in the header is ignored', async () => {
    expect(await status(` ${keys.mailSend} `, 'mail:send')).toBe(200);
  });

  test('revoked key → 401 at once (cached verification is evicted)', async () => {
    const key = await createKey(s, { permissions: ['mail:send'] });
    expect(await status(key, 'mail:send')).toBe(200); // now cached
    const id = (await s.platform.services.keys.verify(key))!.id;
    await s.platform.services.keys.revoke(id);
    expect(await status(key, 'mail:send')).toBe(401);
  });

  test('expired key → 401, even while its verification is cached', async () => {
    const created = await s.platform.services.keys.create({
      type: 'service',
      service: 't',
      permissions: ['mail:send'],
      expiresAt: new Date(Date.now() + 1500),
    });
    expect(await status(created.key, 'mail:send')).toBe(200);
    await within(3000, async () => (await status(created.key, 'mail:send')) === 401);
    expect((await s.platform.services.keys.get(created.id))!.status).toBe('expired');
  });

  test('the cache is used, and a NOTIFY from elsewhere evicts it', async () => {
    const key = await createKey(s, { permissions: ['mail:send'] });
    await settle(s);
    const principal = (await s.platform.services.keys.verify(key))!;
    // Revoked behind the service's back: the cached verification still answers…
    await s.platform.db.query('UPDATE basalt.api_keys SET revoked_at = now() WHERE id = $1', [principal.id]);
    expect(await status(key, 'mail:send')).toBe(200);
    // …until another instance's announcement arrives.
    await s.platform.db.notify(KEYS_CHANNEL, `revoke:${principal.id}`);
    expect(await within(1000, async () => (await status(key, 'mail:send')) === 401)).toBeLessThan(1000);
  });

  test('the cache entry expires after its TTL even without a notification', async () => {
    const svc = new KeyService(s.platform, { cacheTtlMs: 200 });
    const key = await createKey(s, { permissions: ['mail:send'] });
    await settle(s);
    const principal = (await svc.verify(key))!;
    await s.platform.db.query('UPDATE basalt.api_keys SET revoked_at = now() WHERE id = $1', [principal.id]);
    expect(await svc.verify(key)).not.toBeNull();
    await Bun.sleep(250);
    expect(await svc.verify(key)).toBeNull();
    await svc.close();
  });

  test('last_used_at: written on first use, then at most once per interval', async () => {
    const created = await s.platform.services.keys.create({
      type: 'service',
      service: 't',
      permissions: ['mail:send'],
    });
    const lastUsed = async () => (await s.platform.services.keys.get(created.id))!.last_used_at;
    expect(await lastUsed()).toBeNull();
    expect(await status(created.key, 'mail:send')).toBe(200);
    await within(2000, async () => (await lastUsed()) !== null);
    const first = (await lastUsed())!.getTime();
    for (let i = 0; i < 5; i++) expect(await status(created.key, 'mail:send')).toBe(200);
    // A sentinel: the first use of another key, after those. A use's write is issued before the
    // answer, so the sentinel's is issued after any of theirs: once it is there, theirs would be.
    const sentinel = await s.platform.services.keys.create({
      type: 'service',
      service: 't',
      permissions: ['mail:send'],
    });
    expect(await status(sentinel.key, 'mail:send')).toBe(200);
    await within(2000, async () => (await s.platform.services.keys.get(sentinel.id))!.last_used_at !== null);
    expect((await lastUsed())!.getTime()).toBe(first); // within the minute: no more writes

    // A service with a short interval writes again once the interval has passed.
    const svc = new KeyService(s.platform, { touchIntervalMs: 100 });
    await svc.verify(created.key);
    await Bun.sleep(150);
    await svc.verify(created.key);
    await svc.close(); // waits for the pending write
    expect((await lastUsed())!.getTime()).toBeGreaterThan(first);
  });

  test('publicAccess in open mode: a valid key yields its principal, no key or a bad one yields null', async () => {
    const id = (await s.platform.services.keys.verify(keys.public!))!.id;
    expect((await get('/api/v1/keys-test/public', keys.public)).body.data).toEqual({ id });
    expect((await get('/api/v1/keys-test/public')).body.data).toEqual({ id: null });
    expect((await get('/api/v1/keys-test/public', 'pk_' + 'x'.repeat(43))).body.data).toEqual({ id: null });
  });
});

describe.if(ENGINES.includes('external'))('two instances on one external database', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    a = await startServer('external', { extra: [guardRoutes] });
    b = await startServer('external', { db: a.db, extra: [guardRoutes] });
  }, 60_000);
  afterAll(async () => {
    await b.stop();
    await a.stop();
  });

  test('a key revoked on one instance is refused by the other within a second', async () => {
    const created = await a.platform.services.keys.create({
      type: 'service',
      service: 't',
      permissions: ['mail:send'],
    });
    const onB = () => b.req('GET', '/api/v1/keys-test/require/mail-send', { headers: { 'x-api-key': created.key } });
    expect((await onB()).status).toBe(200); // B has verified and cached it
    await a.platform.services.keys.revoke(created.id);
    const elapsed = await within(1000, async () => (await onB()).status === 401);
    expect(elapsed).toBeLessThan(1000);
  });

  test('a lookup that overlaps a revocation notice does not cache its answer', async () => {
    const keys = a.platform.services.keys;
    const created = await keys.create({ type: 'service', service: 'race', permissions: ['mail:send'] });
    await keys.verify('sk_' + 'A'.repeat(43)); // subscribes to notices before the race starts
    const generation = () => (keys as any).cache.generation().revocations as number;
    // Hold the lookup in flight: an exclusive lock makes its SELECT wait.
    const tx = await a.platform.db.begin();
    await tx.query('LOCK TABLE basalt.api_keys IN ACCESS EXCLUSIVE MODE');
    const lookup = keys.verify(created.key);
    await Bun.sleep(50);
    // A revocation notice from another instance arrives while the lookup waits…
    const before = generation();
    await b.platform.db.notify(KEYS_CHANNEL, `revoke:${created.id}`);
    await within(1000, async () => generation() > before);
    await tx.rollback();
    expect(await lookup).not.toBeNull(); // …the lookup read the row as it was,
    // …but did not cache it: the revocation committed now is seen by the next request.
    await a.platform.db.query('UPDATE basalt.api_keys SET revoked_at = now() WHERE id = $1', [created.id]);
    expect(await keys.verify(created.key)).toBeNull();
  });

  test('a key created on one instance works on the other at once', async () => {
    const created = await a.platform.services.keys.create({ type: 'public' });
    expect(
      (await b.req('GET', '/api/v1/keys-test/require/any', { headers: { 'x-api-key': created.key } })).status,
    ).toBe(200);
  });
});
