import { describe, expect, test } from 'bun:test';
import { hasPermission, type ApiKeyPrincipal, type Permission } from '../../src/http/api-key-guard';
import { VerifiedCache } from '../../src/modules/keys/verified-cache';
import { generateKey, hashKey, keyShape, sameHash } from '../../src/modules/keys/key-material';
import { parseExpires } from '../../src/modules/keys/commands';

const principal = (permissions: string[]): ApiKeyPrincipal => ({
  id: 'x',
  type: 'service',
  service: 's',
  permissions,
  tables: [],
});

describe('hasPermission', () => {
  const table: [string[], Permission, boolean][] = [
    [['mail:send'], 'mail:send', true],
    [['mail:*'], 'mail:send', true],
    [['db:query'], 'db:query', true],
    [['db:*'], 'db:query', true],
    [['files:upload'], 'files:upload', true],
    [['files:upload'], 'files:download', false],
    [['files:download'], 'files:download', true],
    [['files:*'], 'files:upload', true],
    [['files:*'], 'files:download', true],
    [['mail:*'], 'db:query', false],
    [['db:*'], 'files:upload', false],
    [['files:*'], 'mail:send', false],
    [[], 'mail:send', false],
    [['*'], 'mail:send', false],
    [['mail'], 'mail:send', false],
  ];
  test.each(table)('%p grants %s: %p', (perms, perm, expected) => {
    expect(hasPermission(principal(perms), perm)).toBe(expected);
  });
});

describe('key material', () => {
  test('shape, prefix and hash', () => {
    const k = generateKey('service');
    expect(k.key).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
    expect(keyShape(k.key)).toBe('service');
    expect(keyShape(generateKey('public').key)).toBe('public');
    expect(k.prefix).toBe(k.key.slice(0, 9));
    expect(k.last4).toBe(k.key.slice(-4));
    expect(k.hash).toBe(hashKey(k.key));
    expect(sameHash(k.hash, hashKey(k.key))).toBe(true);
    expect(sameHash(k.hash, hashKey(k.key + 'x'))).toBe(false);
    for (const bad of [
      '',
      'sk_',
      'xk_' + 'a'.repeat(43),
      'sk_' + 'a'.repeat(42),
      'sk_' + 'a'.repeat(44),
      'sk_' + 'a'.repeat(42) + '!',
    ])
      expect(keyShape(bad)).toBeNull();
  });
});

describe('VerifiedCache', () => {
  const entry = (id: string) => ({
    id,
    type: 'service' as const,
    service: 's',
    permissions: [],
    tables: [],
    expiresAt: null,
  });
  test('TTL, LRU eviction and targeted invalidation', () => {
    const c = new VerifiedCache(1000, 3);
    c.set('a', entry('1'), 0);
    c.set('b', entry('2'), 0);
    c.set('n', null, 0);
    expect(c.get('a', 500)?.id).toBe('1'); // a becomes most recent
    c.set('d', entry('4'), 500); // evicts the least recent: b
    expect(c.get('b', 500)).toBeUndefined();
    expect(c.get('n', 500)).toBeNull();
    expect(c.get('a', 1001)).toBeUndefined(); // expired
    c.evictNegative();
    expect(c.get('n', 600)).toBeUndefined();
    c.evictId('4');
    expect(c.get('d', 600)).toBeUndefined();
    expect(c.size).toBe(0);
  });
});

describe('VerifiedCache.setIfCurrent', () => {
  const entry = { id: '1', type: 'service' as const, service: 's', permissions: [], tables: [], expiresAt: null };
  const table: [string, (c: VerifiedCache) => void, boolean, boolean][] = [
    // name, what happened during the lookup, positive answer cached, negative answer cached
    ['nothing', () => {}, true, true],
    ['a revocation', (c) => c.evictId('9'), false, true],
    ['a creation', (c) => c.evictNegative(), true, false],
    ['a clear', (c) => c.clear(), false, false],
  ];
  test.each(table)('during a lookup: %s', (_n, during, positive, negative) => {
    const c = new VerifiedCache(60_000);
    const gen = c.generation();
    during(c);
    c.setIfCurrent('p', entry, gen);
    c.setIfCurrent('n', null, gen);
    expect(c.get('p') !== undefined).toBe(positive);
    expect(c.get('n') !== undefined).toBe(negative);
  });
});

describe('--expires', () => {
  const now = Date.UTC(2030, 0, 1);
  const table: [string, number][] = [
    ['30d', now + 30 * 86_400_000],
    ['12h', now + 12 * 3_600_000],
    ['2w', now + 14 * 86_400_000],
    ['90m', now + 90 * 60_000],
    ['2031-02-03T04:05:06Z', Date.UTC(2031, 1, 3, 4, 5, 6)],
  ];
  test.each(table)('%s', (v, expected) => expect(parseExpires(v, now).getTime()).toBe(expected));
  test('refuses nonsense', () => expect(() => parseExpires('soon')).toThrow(/neither an ISO date-time/));
});
