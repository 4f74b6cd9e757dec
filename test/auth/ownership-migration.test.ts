/**
 * Migration 170 (docs/auth.md, Account ownership) on a database as 160 left it: the
 * identities of accounts still unverified count as linked while unverified (their owner's
 * first proof of the mailbox unlinks them); those of verified accounts do not.
 */
import { describe, expect, test } from 'bun:test';
import { ENGINES, freshDb } from '../helpers/engines';
import { openDb } from '../../src/db/open';
import { migratePlatform } from '../../src/db/migrate';
import { platformAt } from '../helpers/platform-at';

describe.each(ENGINES)('migration 170_auth_ownership on %s', (engine) => {
  test('identities of unverified accounts are marked linked while unverified', async () => {
    const old = await freshDb(engine);
    const db = await openDb({ url: old.url, dataDir: old.dataDir });
    try {
      await platformAt(db, '160_totp_sealed');
      const user = async (address: string, verified: boolean) => {
        const { rows } = await db.query<{ id: string }>(
          `INSERT INTO basalt.users (email, password_hash, email_verified_at) VALUES ($1, 'x', CASE WHEN $2 THEN now() END) RETURNING id`,
          [address, verified],
        );
        await db.query(
          `INSERT INTO basalt.auth_identities (user_id, provider, subject, email, email_verified) VALUES ($1, 'test', $2, $2, false)`,
          [rows[0]!.id, address],
        );
      };
      await user('unverified@example.com', false);
      await user('verified@example.com', true);
      // 170 first (later ones may follow).
      expect((await migratePlatform(db))[0]).toBe('170_auth_ownership');
      const { rows } = await db.query<{ subject: string; linked_unverified: boolean }>(
        'SELECT subject, linked_unverified FROM basalt.auth_identities ORDER BY subject',
      );
      expect(rows).toEqual([
        { subject: 'unverified@example.com', linked_unverified: true },
        { subject: 'verified@example.com', linked_unverified: false },
      ]);
    } finally {
      await db.close();
      await old.drop();
    }
  }, 120_000);
});
