-- Jobs, cron and hooks of extensions (docs/extensions.md, "Jobs", "Cron", "Hooks").
--
-- One table of jobs, claimed with FOR UPDATE SKIP LOCKED under leases its runner renews
-- (src/modules/jobs/store.ts). A cron run and a hook's event parked after its attempts are
-- jobs too (kind). queued → running → succeeded | queued (retry at run_at) → … → dead;
-- queued → cancelled.
CREATE TABLE basalt.jobs (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  extension       text NOT NULL,
  name            text NOT NULL,
  kind            text NOT NULL DEFAULT 'job' CHECK (kind IN ('job', 'cron', 'hook')),
  state           text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'succeeded', 'dead', 'cancelled')),
  payload         jsonb NOT NULL DEFAULT 'null',
  idempotency_key text,
  attempts        integer NOT NULL DEFAULT 0,
  max_attempts    integer NOT NULL CHECK (max_attempts >= 1),
  run_at          timestamptz NOT NULL DEFAULT now(),
  lease_until     timestamptz,
  claimed_by      text,
  -- One entry per failed attempt: {attempt, at, error}.
  errors          jsonb NOT NULL DEFAULT '[]',
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  finished_at     timestamptz
);
CREATE UNIQUE INDEX jobs_idempotency ON basalt.jobs (extension, name, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_due ON basalt.jobs (extension, name, run_at) WHERE state = 'queued';
CREATE INDEX jobs_leased ON basalt.jobs (lease_until) WHERE state = 'running';
CREATE INDEX jobs_listing ON basalt.jobs (created_at DESC);

-- Each cron entry's last slot taken (compare-and-set: one instance wins a slot).
CREATE TABLE basalt.cron_entries (
  extension  text NOT NULL,
  name       text NOT NULL,
  expression text NOT NULL,
  timezone   text NOT NULL DEFAULT 'UTC',
  last_slot  timestamptz NOT NULL,
  seen_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (extension, name)
);

-- One record per cron entry and slot: run (its job) or skipped (missed while every instance was down).
CREATE TABLE basalt.cron_runs (
  extension text NOT NULL,
  name      text NOT NULL,
  slot      timestamptz NOT NULL,
  job_id    uuid,
  skipped   boolean NOT NULL DEFAULT false,
  PRIMARY KEY (extension, name, slot)
);

-- Each hook's checkpoint in the realtime outbox (the last event id it has handled), and the
-- lease of the instance delivering it (one at a time, so delivery keeps commit order).
CREATE TABLE basalt.hook_checkpoints (
  extension   text NOT NULL,
  name        text NOT NULL,
  source      text NOT NULL,
  position    bigint NOT NULL,
  lease_until timestamptz,
  claimed_by  text,
  seen_at     timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (extension, name)
);

-- Platform events, recorded in the same commit as their change, as outbox messages on a
-- channel no stream can follow ('$platform:<type>'): read by hooks only.
CREATE FUNCTION basalt.platform_event(kind text, data jsonb) RETURNS void
  LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  INSERT INTO basalt.realtime_outbox (channel, payload) VALUES ('$platform:' || kind, data)
$$;

CREATE FUNCTION basalt.platform_events_users() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM basalt.platform_event('auth.user_created', jsonb_build_object('user', jsonb_build_object('id', NEW.id, 'email', NEW.email)));
    IF NEW.email_verified_at IS NOT NULL THEN
      PERFORM basalt.platform_event('auth.user_verified', jsonb_build_object('user', jsonb_build_object('id', NEW.id, 'email', NEW.email)));
    END IF;
  ELSIF TG_OP = 'UPDATE' THEN
    IF OLD.email_verified_at IS NULL AND NEW.email_verified_at IS NOT NULL THEN
      PERFORM basalt.platform_event('auth.user_verified', jsonb_build_object('user', jsonb_build_object('id', NEW.id, 'email', NEW.email)));
    END IF;
  ELSE
    PERFORM basalt.platform_event('auth.user_deleted', jsonb_build_object('user', jsonb_build_object('id', OLD.id, 'email', OLD.email)));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER basalt_platform_events AFTER INSERT OR UPDATE OF email_verified_at OR DELETE ON basalt.users
  FOR EACH ROW EXECUTE FUNCTION basalt.platform_events_users();

CREATE FUNCTION basalt.platform_events_sessions() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM basalt.platform_event('auth.signed_in', jsonb_build_object('user',
    (SELECT jsonb_build_object('id', u.id, 'email', u.email) FROM basalt.users u WHERE u.id = NEW.user_id)));
  RETURN NULL;
END $$;
CREATE TRIGGER basalt_platform_events AFTER INSERT ON basalt.auth_sessions
  FOR EACH ROW EXECUTE FUNCTION basalt.platform_events_sessions();

CREATE FUNCTION basalt.platform_events_mail() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NEW.state IN ('sent', 'dead') AND OLD.state IS DISTINCT FROM NEW.state THEN
    PERFORM basalt.platform_event(CASE NEW.state WHEN 'sent' THEN 'mail.delivered' ELSE 'mail.failed' END,
      jsonb_build_object('job_id', NEW.id, 'to', to_jsonb(NEW.recipients)));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER basalt_platform_events AFTER UPDATE OF state ON basalt.mail_jobs
  FOR EACH ROW EXECUTE FUNCTION basalt.platform_events_mail();

REVOKE ALL ON FUNCTION basalt.platform_event(text, jsonb), basalt.platform_events_users(),
  basalt.platform_events_sessions(), basalt.platform_events_mail() FROM PUBLIC;
