-- Mail API (CONTRACT §9): templates, the delivery queue and idempotency records.

CREATE TABLE basalt.mail_templates (
  name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,99}$'),
  subject    text NOT NULL,
  html       text,
  text       text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (html IS NOT NULL OR text IS NOT NULL)
);

-- One row per message. queued → sending → sent; failed (retry at run_at) → … → dead.
CREATE TABLE basalt.mail_jobs (
  id           uuid PRIMARY KEY,
  key_id       text,                 -- API key that created it; NULL for in-process sends
  state        text NOT NULL CHECK (state IN ('queued', 'sending', 'sent', 'failed', 'dead')),
  sync         boolean NOT NULL DEFAULT false,
  recipients   text[] NOT NULL,
  subject      text NOT NULL,
  text         text,
  html         text,
  template     text,
  message_id   text NOT NULL,
  attempts     integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL,
  last_error   text,
  run_at       timestamptz NOT NULL DEFAULT now(),  -- earliest next attempt
  lease_until  timestamptz,                         -- while sending: reclaimable after this
  claimed_by   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  sent_at      timestamptz
);
CREATE INDEX mail_jobs_due ON basalt.mail_jobs (run_at) WHERE state IN ('queued', 'failed');
CREATE INDEX mail_jobs_leased ON basalt.mail_jobs (lease_until) WHERE state = 'sending';
CREATE INDEX mail_jobs_finished ON basalt.mail_jobs (updated_at) WHERE state IN ('sent', 'dead');
CREATE INDEX mail_jobs_key ON basalt.mail_jobs (key_id, created_at);

-- Idempotency-Key records, unique per API key. status NULL = the first request is in flight.
CREATE TABLE basalt.mail_idempotency (
  key_scope    text NOT NULL,
  idem_key     uuid NOT NULL,
  request_hash text NOT NULL,
  status       integer,
  response     jsonb,
  locked_until timestamptz NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  PRIMARY KEY (key_scope, idem_key)
);
CREATE INDEX mail_idempotency_expiry ON basalt.mail_idempotency (expires_at);
