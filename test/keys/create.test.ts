/**
 * The key service itself (docs/api-keys.md): what it refuses and accepts, how a key is
 * stored, listed and revoked. On the source: it calls the service in this process; the admin API's answers
 * for the same calls run against the executable too (test/admin/endpoints.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import type { CreateKeyInput } from '../../src/modules/keys/model';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const future = () => new Date(Date.now() + 86_400_000);

/** Every refusal: the input, the field named in details.fields, and words the message must contain. */
const refusals: [string, Partial<CreateKeyInput> & Record<string, unknown>, string, RegExp][] = [
  ['no type', {}, 'type', /public' or 'service/],
  ['unknown type', { type: 'admin' as never }, 'type', /public' or 'service/],
  [
    'public key with permissions',
    { type: 'public', permissions: ['mail:send'] },
    'permissions',
    /Public keys carry no permissions/,
  ],
  ['public key with tables', { type: 'public', tables: ['orders'] }, 'tables', /no table whitelist/],
  ['public key with a service', { type: 'public', service: 'billing' }, 'service', /Only service keys/],
  [
    'service key as site key',
    { type: 'service', service: 'b', permissions: ['mail:send'], site: true },
    'site',
    /Only a public key/,
  ],
  ['service key without service', { type: 'service', permissions: ['mail:send'] }, 'service', /must name the service/],
  [
    'service key with blank service',
    { type: 'service', service: '   ', permissions: ['mail:send'] },
    'service',
    /must name the service/,
  ],
  [
    'service name with control characters',
    { type: 'service', service: 'a\nb', permissions: ['mail:send'] },
    'service',
    /control characters/,
  ],
  [
    'service name too long',
    { type: 'service', service: 'x'.repeat(201), permissions: ['mail:send'] },
    'service',
    /longer than 200/,
  ],
  ['service key without permissions', { type: 'service', service: 'b' }, 'permissions', /at least one permission/],
  [
    'unknown permission',
    { type: 'service', service: 'b', permissions: ['db:drop'] },
    'permissions',
    /Unknown permission 'db:drop'; allowed: mail:send, mail:\*, db:query/,
  ],
  [
    'several unknown permissions',
    { type: 'service', service: 'b', permissions: ['admin', 'mail:send', '*'] },
    'permissions',
    /Unknown permissions 'admin', '\*'/,
  ],
  [
    'permissions not a list',
    { type: 'service', service: 'b', permissions: 'mail:send' as never },
    'permissions',
    /list of strings/,
  ],
  [
    'db:query without tables',
    { type: 'service', service: 'b', permissions: ['db:query'] },
    'tables',
    /non-empty table whitelist/,
  ],
  [
    'db:* with an empty whitelist',
    { type: 'service', service: 'b', permissions: ['db:*'], tables: [] },
    'tables',
    /non-empty table whitelist/,
  ],
  [
    'db:* with only blank table names',
    { type: 'service', service: 'b', permissions: ['db:*'], tables: [' '] },
    'tables',
    /non-empty table whitelist/,
  ],
  [
    'table name with SQL',
    { type: 'service', service: 'b', permissions: ['db:query'], tables: ['orders; drop table x'] },
    'tables',
    /not a valid table name/,
  ],
  [
    'schema-qualified table',
    { type: 'service', service: 'b', permissions: ['db:query'], tables: ['basalt.api_keys'] },
    'tables',
    /'basalt.api_keys' is not a valid table name/,
  ],
  [
    'table name starting with a digit',
    { type: 'service', service: 'b', permissions: ['db:query'], tables: ['1orders'] },
    'tables',
    /not a valid table name/,
  ],
  [
    'table name over 63 characters',
    { type: 'service', service: 'b', permissions: ['db:query'], tables: ['t'.repeat(64)] },
    'tables',
    /at most 63/,
  ],
  [
    'tables without a db permission',
    { type: 'service', service: 'b', permissions: ['mail:send'], tables: ['orders'] },
    'tables',
    /only applies to keys with db:query/,
  ],
  ['expiry in the past', { type: 'public', expiresAt: new Date(Date.now() - 1000) }, 'expires_at', /in the future/],
  ['expiry not a date', { type: 'public', expiresAt: 'next tuesday' }, 'expires_at', /ISO 8601/],
  ['name too long', { type: 'public', name: 'n'.repeat(201) }, 'name', /longer than 200/],
];

const accepted: [
  string,
  CreateKeyInput,
  Partial<{ permissions: string[]; tables: string[]; service: string | null; name: string | null }>,
][] = [
  ['minimal public key', { type: 'public' }, { permissions: [], tables: [], service: null }],
  ['public key with a name', { type: 'public', name: ' storefront ' }, { name: 'storefront' }],
  [
    'mail key',
    { type: 'service', service: 'billing', permissions: ['mail:send'] },
    { permissions: ['mail:send'], tables: [], service: 'billing' },
  ],
  [
    'db key with whitelist',
    { type: 'service', service: 'crm', permissions: ['db:*'], tables: ['orders', 'customers'] },
    { permissions: ['db:*'], tables: ['orders', 'customers'] },
  ],
  [
    'every permission, duplicates folded',
    {
      type: 'service',
      service: 'all',
      permissions: ['mail:*', 'db:query', 'files:*', 'mail:*', 'files:upload', 'files:download'],
      tables: ['a', 'a', '_b2'],
    },
    { permissions: ['mail:*', 'db:query', 'files:*', 'files:upload', 'files:download'], tables: ['a', '_b2'] },
  ],
  [
    'files key with expiry',
    { type: 'service', service: 'media', permissions: ['files:upload'], expiresAt: future() },
    { permissions: ['files:upload'] },
  ],
];

describe.each(ENGINES)('key creation on %s', (engine) => {
  let s: TestServer;
  const count = async () =>
    Number((await s.platform.db.query<{ n: string }>('SELECT count(*) AS n FROM basalt.api_keys')).rows[0]!.n);
  beforeAll(async () => {
    s = await startServer(engine);
  }, 60_000);
  afterAll(() => s.stop());

  test.each(refusals)('refuses %s', async (_name, input, field, message) => {
    const before = await count();
    let err: any;
    try {
      await s.platform.services.keys.create(input as CreateKeyInput);
    } catch (e) {
      err = e;
    }
    expect(err).toBeDefined();
    expect(err.status).toBe(400);
    expect(err.code).toBe('validation_error');
    expect(err.message).toMatch(message);
    expect(Object.keys(err.extra.details.fields)).toEqual([field]);
    expect(await count()).toBe(before); // nothing half-written
  });

  test.each(accepted)('accepts %s', async (_name, input, expected) => {
    const k = await s.platform.services.keys.create(input);
    expect(k.key).toMatch(input.type === 'public' ? /^pk_[A-Za-z0-9_-]{43}$/ : /^sk_[A-Za-z0-9_-]{43}$/);
    expect(k).toMatchObject({
      type: input.type,
      status: 'active',
      site: false,
      last_used_at: null,
      revoked_at: null,
      ...expected,
    });
    expect(k.display).toBe(`${k.key.slice(0, 9)}…${k.key.slice(-4)}`);
    const principal = await s.platform.services.keys.verify(k.key);
    expect(principal).toMatchObject({ id: k.id, type: input.type });
  });

  test('keys are random and stored only as their SHA-256 hash', async () => {
    const a = await s.platform.services.keys.create({ type: 'service', service: 'x', permissions: ['mail:send'] });
    const b = await s.platform.services.keys.create({ type: 'service', service: 'x', permissions: ['mail:send'] });
    expect(a.key).not.toBe(b.key);
    const { rows } = await s.platform.db.query<{ key_hash: string; j: string }>(
      'SELECT key_hash, row_to_json(k)::text AS j FROM basalt.api_keys k WHERE id = $1',
      [a.id],
    );
    expect(rows[0]!.key_hash).toBe(sha256(a.key));
    expect(rows[0]!.j).not.toContain(a.key.slice(9, -4)); // the secret middle of the key is nowhere in the row
  });

  test('list shows prefix and last four, never the key or its hash', async () => {
    const k = await s.platform.services.keys.create({
      type: 'service',
      service: 'lister',
      permissions: ['db:query'],
      tables: ['t'],
    });
    const list = await s.platform.services.keys.list();
    const item = list.find((x) => x.id === k.id)!;
    expect(item).toMatchObject({
      prefix: k.key.slice(0, 9),
      last4: k.key.slice(-4),
      service: 'lister',
      status: 'active',
    });
    const text = JSON.stringify(list);
    expect(text).not.toContain(k.key);
    expect(text).not.toContain(sha256(k.key));
    expect(text).not.toContain(k.key.slice(9, -4));
    expect(Object.keys(item)).not.toContain('key');
    expect(Object.keys(item)).not.toContain('key_hash');
    expect(list.map((x) => x.created_at.getTime())).toEqual(
      list.map((x) => x.created_at.getTime()).sort((x, y) => y - x),
    );
  });

  test('revoke: unknown id → 404 key_not_found; revoking twice keeps the first time', async () => {
    for (const id of ['nope', crypto.randomUUID()]) {
      let err: any;
      await s.platform.services.keys.revoke(id).catch((e) => (err = e));
      expect([err?.status, err?.code]).toEqual([404, 'key_not_found']);
    }
    const k = await s.platform.services.keys.create({ type: 'public' });
    const first = await s.platform.services.keys.revoke(k.id);
    expect(first.status).toBe('revoked');
    await Bun.sleep(20);
    const second = await s.platform.services.keys.revoke(k.id);
    expect(second.revoked_at!.getTime()).toBe(first.revoked_at!.getTime());
    expect(await s.platform.services.keys.get(k.id)).toMatchObject({ status: 'revoked' });
  });
});
