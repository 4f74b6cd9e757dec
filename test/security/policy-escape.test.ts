/**
 * A policy can never lift a user's statement to the platform's role (docs/database.md, "Who
 * is which role"), on both engines, through HTTP: a policy written by an operator's migration
 * that calls `set_config('role', <the platform's role>, true)` and then reads `basalt.secrets`
 * through `query_to_xml` gets the user an error, not the secrets; on external PostgreSQL user
 * statements' session user is the authenticator, never the platform's role; the admin Access
 * view refuses such expressions outright, naming the call; and a user's transaction answers
 * only the session that began it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_URL, ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { signInUser, type SignedInUser } from '../helpers/users';
import { expectA, expectAError } from '../helpers/envelopes';
import { startAdminServer } from '../admin/support';
import { dbQuery, dbTx } from '../database/user-data.fixtures';

/** The platform's role: the superuser on the embedded engine, the URL's user on external. */
const platformRole = (engine: string) =>
  engine === 'embedded' ? 'postgres' : decodeURIComponent(new URL(ADMIN_URL).username) || 'postgres';

const migration = (role: string) => `
CREATE TABLE vault (id serial PRIMARY KEY, body text NOT NULL);
ALTER TABLE vault ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON vault TO basalt_user;
INSERT INTO vault (body) VALUES ('vault-row-1');
-- The climb: the role first (cheapest qual), then SQL as text, run as whatever role that reached.
CREATE POLICY climb ON vault FOR SELECT TO basalt_user USING (
  pg_catalog.set_config('role', '${role}', true) IS NOT NULL
  AND length(query_to_xml('SELECT name, value FROM basalt.secrets', true, false, '')::text) > 0
);

-- Who user statements' connection logged in as.
CREATE TABLE sessions_seen (id serial PRIMARY KEY, note text);
ALTER TABLE sessions_seen ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON sessions_seen TO basalt_user;
INSERT INTO sessions_seen (note) VALUES ('visible unless the session user is the platform''s role');
CREATE POLICY not_platform ON sessions_seen FOR SELECT TO basalt_user USING (session_user <> '${role}');

CREATE TABLE board (id serial PRIMARY KEY, owner_id uuid NOT NULL DEFAULT basalt.uid(), msg text);
ALTER TABLE board ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT ON board TO basalt_user;
GRANT USAGE ON SEQUENCE board_id_seq TO basalt_user;
CREATE POLICY own ON board FOR ALL TO basalt_user USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
`;

describe.each(ENGINES)('policies and the platform role on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  let user: SignedInUser;
  const dir = mkdtempSync(join(tmpdir(), 'basalt-policy-escape-'));

  beforeAll(async () => {
    writeFileSync(join(dir, '001_vault.sql'), migration(platformRole(engine)));
    s = await startAdminServer(engine, { env: { BASALT_MIGRATIONS_DIR: dir } });
    a = await signInAdmin(s);
    user = await signInUser(s);
  }, 240_000);
  afterAll(async () => {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a policy that sets the role to the platform's gets the user a 403, never the row or a secret", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await dbQuery(s, user, { entity: 'vault', action: 'select' });
      expectAError(r, 403, 'forbidden');
      expect(r.text).not.toContain('vault-row-1');
      expect(r.text).not.toContain('jwt');
    }
    // The user's next statement is unharmed: nothing of the failed one stayed on the connection.
    expectA(await dbQuery(s, user, { entity: 'board', action: 'insert', data: { msg: 'hi' } }), 200);
    const mine = expectA(await dbQuery(s, user, { entity: 'board', action: 'select', fields: ['msg'] }), 200);
    expect(mine.rows).toEqual([{ msg: 'hi' }]);
  });

  test.skipIf(engine === 'embedded')(
    "external: user statements' connections log in as the authenticator, not as the platform's role",
    async () => {
      const r = expectA(await dbQuery(s, user, { entity: 'sessions_seen', action: 'select', fields: ['note'] }), 200);
      expect(r.rows).toHaveLength(1);
    },
  );

  test('the Access view refuses a policy that calls set_config, query_to_xml or their kin, naming the call', async () => {
    const files = () => readdirSync(dir).sort();
    const before = files();
    const cases: [string, string][] = [
      ["set_config('role', 'postgres', true) IS NOT NULL", 'set_config'],
      [
        `"pg_catalog"."set_config"('basalt.uid', '00000000-0000-0000-0000-000000000000', true) IS NOT NULL`,
        'set_config',
      ],
      ["length(query_to_xml('SELECT 1', true, false, '')::text) > 0", 'query_to_xml'],
      ["EXISTS (SELECT 1 FROM ts_stat('SELECT to_tsvector(''x'')'))", 'ts_stat'],
      ["owner_id = basalt.uid() OR (SELECT pg_catalog.pg_read_file('/etc/passwd')) <> ''", 'pg_read_file'],
    ];
    // Applied, or only previewed (the panel stages a change through the preview, which runs it
    // in a transaction it rolls back): refused alike.
    for (const [using, fn] of cases)
      for (const route of ['access', 'access/preview']) {
        const r = await adminReq(s, a, 'POST', `/api/admin/data/board/${route}`, {
          changes: [{ op: 'create_policy', name: 'sneaky', command: 'SELECT', roles: ['basalt_user'], using }],
        });
        expectAError(r, 400, 'validation_error');
        expect(Object.keys(r.body.error.details.fields)).toEqual(['changes[0].using']);
        expect(r.body.error.details.fields['changes[0].using']).toContain(`calls ${fn}`);
      }
    // The same in WITH CHECK.
    const check = await adminReq(s, a, 'POST', '/api/admin/data/board/access', {
      changes: [
        {
          op: 'create_policy',
          name: 'sneaky',
          command: 'INSERT',
          roles: ['basalt_user'],
          with_check: "set_config('role', 'postgres', true) = 'postgres'",
        },
      ],
    });
    expectAError(check, 400, 'validation_error');
    expect(check.body.error.details.fields['changes[0].with_check']).toContain('calls set_config');
    // Nothing was applied or written; a plain policy still is.
    expect(files()).toEqual(before);
    const access = await adminReq(s, a, 'GET', '/api/admin/data/board/access');
    expect(access.body.data.policies.map((p: { name: string }) => p.name)).toEqual(['own']);
    const fine = await adminReq(s, a, 'POST', '/api/admin/data/board/access', {
      changes: [
        {
          op: 'create_policy',
          name: 'recent',
          command: 'SELECT',
          roles: ['basalt_user'],
          using: "msg IS NOT NULL AND basalt.jwt() ->> 'email' = lower(basalt.jwt() ->> 'email')",
        },
      ],
    });
    expect(fine.status).toBe(200);
  });

  test("a user's transaction answers only the session that began it", async () => {
    const other = await signInUser(s, { email: user.email, password: user.password, register: false });
    // Known to the instance before the transaction: on the embedded engine a session looked up
    // while it is open would wait for it, and the transaction would be asked to yield.
    expectA(await dbQuery(s, other, { entity: 'board', action: 'select' }), 200);
    const id = expectA(await dbTx(s, user, 'begin'), 200).transaction_id as string;
    const body = { entity: 'board', action: 'insert', data: { msg: 'in tx' }, transaction_id: id };
    expectAError(await dbQuery(s, other, body), 404, 'transaction_not_found');
    expectAError(await dbTx(s, other, `${id}/commit`), 404, 'transaction_not_found');
    expectAError(await dbTx(s, other, `${id}/rollback`), 404, 'transaction_not_found');
    // Still open and the beginning session's.
    expectA(await dbQuery(s, user, body), 200);
    expectA(await dbTx(s, user, `${id}/commit`), 200);
    const rows = expectA(await dbQuery(s, other, { entity: 'board', action: 'select', fields: ['msg'] }), 200).rows;
    expect(rows.map((r: { msg: string }) => r.msg)).toContain('in tx');
  });
});
