/**
 * The external server's version check at open (src/db/open.ts): below the oldest supported
 * major the platform refuses to start, naming the version and the range. The supported ends
 * themselves run the external suites in CI (scripts/postgres-versions.ts).
 */
import { describe, expect, test } from 'bun:test';
import { checkServerVersion, SUPPORTED_MAJORS } from '../../src/db/open';
import type { Db } from '../../src/db/engine';

const server = (num: string) => ({ query: async () => ({ rows: [{ v: num }] }) }) as unknown as Db;

describe('server version', () => {
  test('12 is refused, naming the version and the supported range', async () => {
    await expect(checkServerVersion(server('120017'))).rejects.toThrow(
      `PostgreSQL 12 is not supported: Basalt needs ${SUPPORTED_MAJORS.oldest} to ${SUPPORTED_MAJORS.newest}`,
    );
  });
  test.each(['130023', '150019', '180004', '190000'])('%s is accepted', async (v) => {
    await expect(checkServerVersion(server(v))).resolves.toBeUndefined();
  });
});
