/**
 * Password hashing rules, in process (no server needed).
 */
import { describe, expect, test } from 'bun:test';
import {
  ARGON2,
  MAX_CONCURRENT_HASHES,
  hashPassword,
  needsRehash,
  passwordProblem,
  peakConcurrentHashes,
  verifyPassword,
} from '../../src/modules/auth/passwords';

describe('passwords', () => {
  const policy: [string, string, number, string | undefined][] = [
    ['8 characters at minimum 8', 'abcdefgh', 8, undefined],
    ['7 characters at minimum 8', 'abcdefg', 8, 'must be at least 8 characters'],
    ['emoji count as one character each', '🔑🔑🔑🔑🔑🔑🔑🔑', 8, undefined],
    ['1024 characters', 'x'.repeat(1024), 8, undefined],
    ['1025 characters', 'x'.repeat(1025), 8, 'must be at most 1024 characters'],
  ];
  test.each(policy)('policy: %s', (_n, password, min, problem) => {
    expect(passwordProblem(password, min)).toBe(problem);
  });

  test('argon2id with the documented parameters; verify tells right from wrong; a broken hash never matches', async () => {
    const h = await hashPassword('correct horse battery');
    expect(h).toStartWith(`$argon2id$v=19$m=${ARGON2.memoryCost},t=${ARGON2.timeCost},p=1$`);
    expect(needsRehash(h)).toBe(false);
    expect(needsRehash('$argon2id$v=19$m=65536,t=2,p=1$abc$def')).toBe(true);
    expect(needsRehash('$2b$10$abcdefghijklmnopqrstuv')).toBe(true);
    expect(await verifyPassword('correct horse battery', h)).toBe(true);
    expect(await verifyPassword('correct horse batterY', h)).toBe(false);
    expect(await verifyPassword('anything', 'not a hash')).toBe(false);
  });

  test('a burst of hashes runs at most MAX_CONCURRENT_HASHES at once, and all complete', async () => {
    const hashes = await Promise.all(
      Array.from({ length: MAX_CONCURRENT_HASHES * 3 }, (_, i) => hashPassword(`password ${i}`)),
    );
    expect(new Set(hashes).size).toBe(MAX_CONCURRENT_HASHES * 3);
    expect(peakConcurrentHashes()).toBe(MAX_CONCURRENT_HASHES);
  });
});
