-- Submissions per client IP in the current one-hour window (schema ext_contact_form).
-- In the database, so every instance on one database shares the counters.
CREATE TABLE rate_limits (
  ip           text PRIMARY KEY,
  window_start timestamptz NOT NULL,
  hits         integer NOT NULL
);
