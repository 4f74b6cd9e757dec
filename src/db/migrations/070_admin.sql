-- Administration (docs/admin-api.md): administrators, their sessions, the one-time setup
-- link, the audit log, the instances seen on this database, and a `cancelled` mail job state.

-- Administrators are their own accounts, never site users (basalt.users).
CREATE TABLE basalt.admins (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email         text NOT NULL CHECK (email = lower(btrim(email)) AND email <> ''),
  password_hash text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  last_login_at timestamptz,
  CONSTRAINT admins_email_key UNIQUE (email)
);

-- One signed-in browser. Only SHA-256 of the cookie's 32 random bytes is kept, so every
-- instance on this database knows the session and a database leak reveals no cookie.
-- Idle and absolute lifetimes are live settings, checked against these columns.
CREATE TABLE basalt.admin_sessions (
  token_hash   bytea PRIMARY KEY,
  id           uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  admin_id     uuid NOT NULL REFERENCES basalt.admins (id) ON DELETE CASCADE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  ip           text,
  user_agent   text
);
CREATE INDEX admin_sessions_admin_idx ON basalt.admin_sessions (admin_id);

-- The setup link printed by `serve` while no administrator exists: hash only, 30 minutes, single use.
CREATE TABLE basalt.admin_setup_tokens (
  token_hash bytea PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at    timestamptz
);

-- Every administrative change, written in the same transaction as the change.
CREATE TABLE basalt.admin_audit (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT now(),
  admin_id    uuid REFERENCES basalt.admins (id) ON DELETE SET NULL,
  admin_email text,
  ip          text,
  user_agent  text,
  action      text NOT NULL,
  target      text,
  diff        jsonb,
  request_id  text
);
CREATE INDEX admin_audit_at_idx ON basalt.admin_audit (at);
CREATE INDEX admin_audit_action_idx ON basalt.admin_audit (action, id);

-- Running instances, refreshed by a heartbeat (dashboard: "instances seen").
CREATE TABLE basalt.instances (
  id         uuid PRIMARY KEY,
  host       text NOT NULL,
  pid        integer NOT NULL,
  version    text NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  seen_at    timestamptz NOT NULL DEFAULT now()
);

-- An administrator may cancel a queued mail job.
ALTER TABLE basalt.mail_jobs DROP CONSTRAINT mail_jobs_state_check;
ALTER TABLE basalt.mail_jobs ADD CONSTRAINT mail_jobs_state_check
  CHECK (state IN ('queued', 'sending', 'sent', 'failed', 'dead', 'cancelled'));
