/**
 * Migration 170 (docs/auth.md, Account ownership) on a database as 160 left it: the
 * identities of accounts still unverified count as linked while unverified (their owner's
 * first proof of the mailbox unlinks them); those of verified accounts do not.
 */
import { describe, expect, test } from 'bun:test';
import { ENGINES, freshDb } from '../helpers/engines';
import { openDb } from '../../src/db/open';
import { migratePlatform } from '../../src/db/migrate';
import { platformMigrations } from '../../src/db/platform-migrations';

describe.each(ENGINES)('migration 170_auth_ownership on %s', (engine) => {
  test('identities of unverified accounts are marked linked while unverified', async () => {
    const old = await freshDb(engine);
    const db = await openDb({ url: old.url, dataDir: old.dataDir });
    try {
      await db.exec(`CREATE SCHEMA basalt;
        CREATE TABLE basalt.platform_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
      const upTo = platformMigrations.findIndex((m) => m.name === '160_totp_sealed');
      await db.transaction(async (tx) => {
        for (const m of platformMigrations.slice(0, upTo + 1)) {
          if ('sql' in m) await tx.exec(m.sql);
          else await m.run(tx);
          await tx.query('INSERT INTO basalt.platform_migrations (name) VALUES ($1)', [m.name]);
        }
      });
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
      expect(await migratePlatform(db)).toEqual(['170_auth_ownership']);
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
