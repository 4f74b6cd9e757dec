-- The request log (docs/logs.md): one row per answered request, written in batches by the
-- listener's buffer (src/modules/logs/writer.ts), pruned past logs.retention_days.
-- Successes may be sampled (logs.sample_rate); answers with status >= 400 are always kept.
CREATE TABLE basalt.request_log (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at          timestamptz NOT NULL,
  request_id  text NOT NULL,
  method      text NOT NULL,
  -- The path and query string, values of secret-looking parameters replaced by [redacted].
  path        text NOT NULL,
  status      smallint NOT NULL,
  duration_ms real NOT NULL,
  area        text NOT NULL,
  key_id      uuid,
  user_id     uuid,
  ip          text,
  -- An error answer: {code, message}, and for a 5xx the cause the stdout log recorded.
  error       jsonb,
  -- How many requests the row stands for: 1, or 1/p for a success kept with chance p
  -- (logs.sample_rate, logs.max_per_second), so per-minute counts stay estimates of all.
  weight      real NOT NULL DEFAULT 1
);
-- Rows arrive in time order: a BRIN index serves time ranges and retention at little cost per
-- insert. A request id is only ever looked up whole: a hash index, a third of a btree's cost per
-- insert of a random id (docs/bench/2026-11-29-request-log.md).
CREATE INDEX request_log_at ON basalt.request_log USING brin (at);
CREATE INDEX request_log_request_id ON basalt.request_log USING hash (request_id);
