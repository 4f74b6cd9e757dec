-- Sign-in beyond passwords (docs/auth.md): provider identities, the OAuth flow's state,
-- one-time exchange codes, e-mail codes, TOTP and recovery codes, the MFA step.

-- An account made by a provider or an e-mail code has no password until the user sets one.
ALTER TABLE basalt.users ALTER COLUMN password_hash DROP NOT NULL;

-- How the session was signed in (RFC 8176 style: pwd, otp, oauth, totp, recovery): refreshed
-- access tokens keep the session's `amr` and `aal`. Sessions from before this migration were
-- all password logins.
ALTER TABLE basalt.auth_sessions ADD COLUMN amr text[] NOT NULL DEFAULT '{pwd}';

-- A provider account linked to a user: (provider, subject) is the provider's stable id.
CREATE TABLE basalt.auth_identities (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id        uuid NOT NULL REFERENCES basalt.users (id) ON DELETE CASCADE,
  provider       text NOT NULL,
  subject        text NOT NULL,
  -- What the provider said at the last sign-in (shown to the user; never used to find the account).
  email          text,
  email_verified boolean NOT NULL DEFAULT false,
  created_at     timestamptz NOT NULL DEFAULT now(),
  last_used_at   timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT auth_identities_provider_subject_key UNIQUE (provider, subject)
);
CREATE INDEX auth_identities_user_idx ON basalt.auth_identities (user_id);

-- A started provider sign-in, found by SHA-256 of its `state` and spent at the callback. The
-- browser that started it holds a cookie whose SHA-256 is `binding_hash`.
CREATE TABLE basalt.auth_oauth_flows (
  state_hash    bytea PRIMARY KEY,
  binding_hash  bytea NOT NULL,
  provider      text NOT NULL,
  code_verifier text NOT NULL,
  nonce         text NOT NULL,
  redirect_to   text NOT NULL,
  -- The callback URL sent to the provider, sent again with the code (they must match).
  redirect_uri  text NOT NULL,
  -- Set when a signed-in user links a provider instead of signing in.
  link_user_id  uuid REFERENCES basalt.users (id) ON DELETE CASCADE,
  expires_at    timestamptz NOT NULL
);

-- Short-lived single-use codes (60 s): `exchange`, handed to the front-end in the URL fragment
-- by a callback; `link`, a signed-in user's ticket to start linking a provider.
CREATE TABLE basalt.auth_exchange_codes (
  id          text PRIMARY KEY,
  purpose     text NOT NULL CHECK (purpose IN ('exchange', 'link')),
  secret_hash bytea NOT NULL,
  user_id     uuid NOT NULL REFERENCES basalt.users (id) ON DELETE CASCADE,
  amr         text[] NOT NULL,
  expires_at  timestamptz NOT NULL
);

-- The live e-mail code of an address (account or not): only an HMAC of it is kept.
CREATE TABLE basalt.auth_email_codes (
  email      text PRIMARY KEY,
  code_hash  bytea NOT NULL,
  attempts   integer NOT NULL DEFAULT 0,
  expires_at timestamptz NOT NULL
);

-- TOTP (RFC 6238). The secret must be readable to check codes. `last_step` is the time step of
-- the last accepted code: a code of that step or an earlier one is refused (no replay).
CREATE TABLE basalt.auth_totp (
  user_id      uuid PRIMARY KEY REFERENCES basalt.users (id) ON DELETE CASCADE,
  secret       text NOT NULL,
  confirmed_at timestamptz,
  last_step    bigint,
  created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE basalt.auth_recovery_codes (
  id        uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id   uuid NOT NULL REFERENCES basalt.users (id) ON DELETE CASCADE,
  code_hash bytea NOT NULL,
  used_at   timestamptz
);
CREATE INDEX auth_recovery_codes_user_idx ON basalt.auth_recovery_codes (user_id);

-- The pending second step of a sign-in: `mfa_token` is `<id>.<secret>`, SHA-256 of the secret kept.
CREATE TABLE basalt.auth_mfa_challenges (
  id          text PRIMARY KEY,
  secret_hash bytea NOT NULL,
  user_id     uuid NOT NULL REFERENCES basalt.users (id) ON DELETE CASCADE,
  amr         text[] NOT NULL,
  expires_at  timestamptz NOT NULL
);

-- The e-mail code mail (operators may edit it; this only inserts what is absent).
-- Variables: app_name, email, code, expires_in_minutes.
INSERT INTO basalt.mail_templates (name, subject, text, html) VALUES
('auth.otp',
 'Your {{ app_name }} sign-in code: {{ code }}',
 $tpl$Hello,

Your code to sign in to {{ app_name }} as {{ email }} is:

{{ code }}

It expires in {{ expires_in_minutes }} minutes and works once. If you did not ask for it, ignore this message.
$tpl$,
 $tpl$<!doctype html>
<html><body style="font-family: sans-serif; line-height: 1.5">
<p>Hello,</p>
<p>Your code to sign in to {{ app_name }} as <strong>{{ email }}</strong> is:</p>
<p style="font-size: 1.6em; letter-spacing: 0.2em"><strong>{{ code }}</strong></p>
<p>It expires in {{ expires_in_minutes }} minutes and works once. If you did not ask for it, ignore this message.</p>
</body></html>
$tpl$)
ON CONFLICT (name) DO NOTHING;
