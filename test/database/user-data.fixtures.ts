/**
 * Users' own data (docs/database.md): the operator migration the suites run (the notes
 * example of the docs, plus column grants, an insert-only table and a view showing the
 * identity), and request helpers for a user, anon or a key.
 */
import type { Reply, TestServer } from '../helpers/server';

export const NOTES_MIGRATION = `
CREATE TABLE notes (id bigserial PRIMARY KEY, owner_id uuid NOT NULL DEFAULT basalt.uid(),
                    body text NOT NULL, shared boolean NOT NULL DEFAULT false);
CREATE INDEX notes_owner ON notes (owner_id);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON notes TO basalt_user;
GRANT USAGE ON SEQUENCE notes_id_seq TO basalt_user;
GRANT SELECT ON notes TO basalt_anon;
CREATE POLICY own ON notes FOR ALL TO basalt_user
  USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
CREATE POLICY shared_read ON notes FOR SELECT TO basalt_anon, basalt_user USING (shared);

-- Column grants: anon and users read id and title only; users may change the title.
CREATE TABLE posts (id serial PRIMARY KEY, title text NOT NULL, secret text);
GRANT SELECT (id, title) ON posts TO basalt_anon;
GRANT SELECT (id, title), UPDATE (title) ON posts TO basalt_user;
INSERT INTO posts (title, secret) VALUES ('hello', 's1'), ('world', 's2');

-- Anon may only add rows (and read none of them back).
CREATE TABLE guestbook (id serial PRIMARY KEY, msg text NOT NULL);
GRANT INSERT (msg) ON guestbook TO basalt_anon;
GRANT USAGE ON SEQUENCE guestbook_id_seq TO basalt_anon;

-- Granted to nobody.
CREATE TABLE hidden (id int PRIMARY KEY, v text);
INSERT INTO hidden VALUES (1, 'x');

-- Who the statement runs as.
CREATE VIEW whoami AS
  SELECT basalt.uid() AS uid, basalt.role() AS role, basalt.jwt() ->> 'sub' AS sub,
         basalt.jwt() ->> 'email' AS email, (basalt.jwt() ->> 'email_verified')::boolean AS email_verified,
         basalt.jwt() ->> 'sid' AS sid, current_user::text AS db_role;
GRANT SELECT ON whoami TO basalt_user, basalt_anon;
`;

export type Who = { headers(extra?: Record<string, string>): Record<string, string> } | string | undefined;

function headersOf(who: Who): Record<string, string> {
  if (who === undefined) return {};
  if (typeof who === 'string') return { 'x-api-key': who };
  return who.headers();
}

/** POST /api/v1/db/query as a signed-in user, a key, or nobody (anon). */
export function dbQuery(s: TestServer, who: Who, body: unknown): Promise<Reply> {
  return s.req('POST', '/api/v1/db/query', { headers: headersOf(who), body });
}

export function dbTx(s: TestServer, who: Who, path: string): Promise<Reply> {
  return s.req('POST', `/api/v1/db/transaction/${path}`, { headers: headersOf(who), body: {} });
}
