-- API keys (CONTRACT §6). Only a SHA-256 hash of each key is stored; the key itself
-- is shown once at creation. prefix/last4 let an operator recognise a key in lists.
CREATE TABLE basalt.api_keys (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  type         text NOT NULL CHECK (type IN ('public', 'service')),
  name         text,
  service      text,
  permissions  text[] NOT NULL DEFAULT '{}',
  tables       text[] NOT NULL DEFAULT '{}',
  key_hash     text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  prefix       text NOT NULL,
  last4        text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz,
  revoked_at   timestamptz,
  last_used_at timestamptz,
  -- Public keys carry no permissions and no service; service keys always name a service.
  CHECK (type = 'service' OR (service IS NULL AND cardinality(permissions) = 0 AND cardinality(tables) = 0)),
  CHECK (type = 'public' OR (service IS NOT NULL AND service <> ''))
);

CREATE INDEX api_keys_created_at ON basalt.api_keys (created_at DESC);
