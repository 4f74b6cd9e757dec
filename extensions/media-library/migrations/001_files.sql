-- File metadata of the media-library extension (schema ext_media_library).
-- The bytes live in the storage named by `storage`; `storage_key` locates them there.
CREATE TABLE files (
  id           uuid PRIMARY KEY,
  owner_type   text NOT NULL CHECK (owner_type IN ('user', 'key')),
  owner_id     text NOT NULL,
  name         text NOT NULL,
  content_type text NOT NULL,
  size         bigint NOT NULL CHECK (size >= 0),
  sha256       text NOT NULL,
  storage      text NOT NULL CHECK (storage IN ('local', 's3')),
  storage_key  text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);

-- Listing a user's (or key's) files, newest first, is the common query.
CREATE INDEX files_owner_created ON files (owner_type, owner_id, created_at DESC, id);
CREATE INDEX files_created ON files (created_at DESC, id);
