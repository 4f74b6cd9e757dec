-- Public Auth: site users, sessions, refresh tokens, single-use tokens, counters (CONTRACT §8).

CREATE TABLE basalt.users (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- Stored normalized (trimmed, lower-case) so one address is one account.
  email             text NOT NULL CHECK (email = lower(btrim(email)) AND email <> ''),
  password_hash     text NOT NULL,
  email_verified_at timestamptz,
  -- Set by an administrator; a disabled user cannot log in and its tokens stop working.
  disabled_at       timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT users_email_key UNIQUE (email)
);

-- One login on one device. Access tokens name their session; revoking it ends them at once.
CREATE TABLE basalt.auth_sessions (
  id             uuid PRIMARY KEY,
  user_id        uuid NOT NULL REFERENCES basalt.users (id) ON DELETE CASCADE,
  created_at     timestamptz NOT NULL DEFAULT now(),
  last_used_at   timestamptz NOT NULL DEFAULT now(),
  -- Moves forward with every refresh (sliding 30 days).
  expires_at     timestamptz NOT NULL,
  revoked_at     timestamptz,
  revoked_reason text,
  ip             text,
  user_agent     text
);
CREATE INDEX auth_sessions_user_idx ON basalt.auth_sessions (user_id);

-- Refresh tokens are `<id>.<secret>`; only SHA-256(secret) is kept. A row with used_at set
-- was rotated: presenting it again is reuse and revokes the whole session.
CREATE TABLE basalt.auth_refresh_tokens (
  id          text PRIMARY KEY,
  session_id  uuid NOT NULL REFERENCES basalt.auth_sessions (id) ON DELETE CASCADE,
  secret_hash bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX auth_refresh_tokens_session_idx ON basalt.auth_refresh_tokens (session_id);

-- Password-reset and e-mail verification tokens: single use, hashed at rest.
CREATE TABLE basalt.auth_action_tokens (
  id          text PRIMARY KEY,
  user_id     uuid NOT NULL REFERENCES basalt.users (id) ON DELETE CASCADE,
  purpose     text NOT NULL CHECK (purpose IN ('password_reset', 'verify_email')),
  email       text NOT NULL,
  secret_hash bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX auth_action_tokens_user_idx ON basalt.auth_action_tokens (user_id, purpose);

-- Fixed-window counters shared by every instance on this database (rate limits).
CREATE TABLE basalt.auth_rate_limits (
  bucket       text PRIMARY KEY,
  window_start timestamptz NOT NULL,
  hits         integer NOT NULL
);

-- Failed logins per e-mail address (known or not, so a lock reveals nothing) and the lock.
CREATE TABLE basalt.auth_login_failures (
  email        text PRIMARY KEY,
  window_start timestamptz NOT NULL,
  failures     integer NOT NULL,
  locked_until timestamptz
);
