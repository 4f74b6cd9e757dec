-- Mail idempotency keys move onto the job they stand for (docs/mail.md, "Idempotency"):
-- a keyed send writes one row, not a job and a separate record. The partial unique index
-- decides which request owns a key, on every instance sharing the database. The answer a
-- replay gets (job id, sync, recipient count, 202 or 200) is read off the job itself.
ALTER TABLE basalt.mail_jobs ADD COLUMN idem_key uuid, ADD COLUMN idem_hash text;
CREATE UNIQUE INDEX mail_jobs_idem ON basalt.mail_jobs (key_id, idem_key) WHERE idem_key IS NOT NULL;

-- Records still live whose answer names a job keep working: the job takes their key.
-- (A sync send in flight during the upgrade has no answer yet; its key is free afterwards.)
UPDATE basalt.mail_jobs j
   SET idem_key = r.idem_key, idem_hash = r.request_hash
  FROM basalt.mail_idempotency r
 WHERE r.status IS NOT NULL AND r.expires_at >= now()
   AND j.key_id = r.key_scope AND j.id::text = r.response->>'job_id';

DROP TABLE basalt.mail_idempotency;
