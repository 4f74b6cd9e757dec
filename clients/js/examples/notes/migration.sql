-- The notes example's table: each user's own notes, live. Put it in migrations.dir
-- (e.g. migrations/001_notes.sql); docs/frontend.md explains each line.
CREATE TABLE notes (
  id bigserial PRIMARY KEY,
  owner_id uuid NOT NULL DEFAULT basalt.uid(),
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notes_owner ON notes (owner_id);
GRANT SELECT, INSERT, UPDATE, DELETE ON notes TO basalt_user;
GRANT USAGE ON SEQUENCE notes_id_seq TO basalt_user;
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON notes FOR ALL TO basalt_user
  USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
SELECT basalt.realtime_enable('notes');
