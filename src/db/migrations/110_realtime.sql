-- Realtime (docs/realtime.md): row changes captured inside the writing transaction.
--
-- A trigger on each enabled table writes one outbox row per changed row (table, action,
-- primary key) without an event id. At commit, a deferred constraint trigger takes one
-- advisory lock (held until the commit is complete and visible) and stamps this
-- transaction's rows with ids from a sequence: ids are therefore handed out in commit
-- order, and a reader that has seen id N never later finds a smaller id appear.
CREATE SEQUENCE basalt.realtime_event_id;

CREATE TABLE basalt.realtime_outbox (
  seq bigserial PRIMARY KEY,
  -- The event id: NULL until the writing transaction commits.
  id bigint,
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  -- When the id was stamped (retention counts from here).
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- A row change: schema, table, action, primary key columns as a JSON object, and the
  -- row after the change (insert, update) and before it (update), as to_jsonb made them.
  rel_schema text,
  rel_name text,
  action text CHECK (action IN ('insert', 'update', 'delete')),
  pk jsonb,
  new_row jsonb,
  old_row jsonb,
  -- A message an extension published (docs/extensions.md, ctx.realtime).
  channel text,
  payload jsonb,
  -- Users a channel message is for (NULL: every subscriber of the channel).
  audience uuid[],
  CHECK ((rel_name IS NOT NULL AND action IS NOT NULL AND pk IS NOT NULL) OR channel IS NOT NULL)
);
CREATE UNIQUE INDEX realtime_outbox_id ON basalt.realtime_outbox (id) WHERE id IS NOT NULL;
CREATE INDEX realtime_outbox_unstamped ON basalt.realtime_outbox (xid) WHERE id IS NULL;

-- The highest event id pruned by retention: a resume from below it cannot be complete.
CREATE TABLE basalt.realtime_state (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  pruned_through bigint NOT NULL DEFAULT 0
);
INSERT INTO basalt.realtime_state DEFAULT VALUES;

-- One-time tickets for EventSource, which cannot send headers: only a hash is stored.
CREATE TABLE basalt.realtime_tickets (
  hash bytea PRIMARY KEY,
  -- 'key' (key_id), 'user' (user_id, session_id, token_expires_at) or 'anon'.
  kind text NOT NULL CHECK (kind IN ('key', 'user', 'anon')),
  key_id uuid,
  user_id uuid,
  session_id uuid,
  token_expires_at timestamptz,
  expires_at timestamptz NOT NULL
);
CREATE INDEX realtime_tickets_expires ON basalt.realtime_tickets (expires_at);

-- The row trigger: TG_ARGV holds the primary key columns (basalt.realtime_enable puts them there).
CREATE FUNCTION basalt.realtime_capture() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  old_pk jsonb;
  new_pk jsonb;
  old_r jsonb;
  new_r jsonb;
BEGIN
  IF TG_OP <> 'INSERT' THEN
    old_r := to_jsonb(OLD);
    SELECT jsonb_object_agg(k, old_r -> k) INTO old_pk FROM unnest(TG_ARGV) AS k;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    new_r := to_jsonb(NEW);
    SELECT jsonb_object_agg(k, new_r -> k) INTO new_pk FROM unnest(TG_ARGV) AS k;
  END IF;
  IF TG_OP = 'UPDATE' AND old_pk IS DISTINCT FROM new_pk THEN
    -- A changed primary key: the old row is gone, a new one is there.
    INSERT INTO basalt.realtime_outbox (rel_schema, rel_name, action, pk, new_row)
    VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, 'delete', old_pk, NULL),
           (TG_TABLE_SCHEMA, TG_TABLE_NAME, 'insert', new_pk, new_r);
  ELSIF TG_OP = 'DELETE' THEN
    -- A delete names the key only (sent to every subscriber who may read the table).
    INSERT INTO basalt.realtime_outbox (rel_schema, rel_name, action, pk)
    VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, 'delete', old_pk);
  ELSE
    INSERT INTO basalt.realtime_outbox (rel_schema, rel_name, action, pk, new_row, old_row)
    VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, lower(TG_OP), new_pk, new_r, old_r);
  END IF;
  RETURN NULL;
END $$;

-- At commit: stamp this transaction's outbox rows with ids, in the order they were written.
CREATE FUNCTION basalt.realtime_stamp() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM basalt.realtime_outbox WHERE xid = pg_current_xact_id() AND id IS NULL) THEN
    RETURN NULL;
  END IF;
  -- Held until this transaction's commit is visible: the next writer stamps after it.
  PERFORM pg_advisory_xact_lock(8301442217);
  UPDATE basalt.realtime_outbox o
     SET id = s.id, created_at = clock_timestamp()
    FROM (SELECT q.seq, nextval('basalt.realtime_event_id') AS id
            FROM (SELECT seq FROM basalt.realtime_outbox
                   WHERE xid = pg_current_xact_id() AND id IS NULL ORDER BY seq) q) s
   WHERE o.seq = s.seq;
  -- Delivered at commit (once per transaction) to every instance's reader.
  PERFORM pg_notify('basalt_realtime', '');
  RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER realtime_stamp AFTER INSERT ON basalt.realtime_outbox
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION basalt.realtime_stamp();

CREATE FUNCTION basalt.realtime_enable(t regclass) RETURNS void
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  cols text;
BEGIN
  SELECT string_agg(quote_literal(a.attname), ', ' ORDER BY array_position(i.indkey::int2[], a.attnum))
    INTO cols
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
   WHERE i.indrelid = t AND i.indisprimary;
  IF cols IS NULL THEN
    RAISE EXCEPTION 'basalt.realtime_enable: table % has no primary key; realtime events name rows by it', t;
  END IF;
  EXECUTE format('DROP TRIGGER IF EXISTS basalt_realtime ON %s', t);
  EXECUTE format('CREATE TRIGGER basalt_realtime AFTER INSERT OR UPDATE OR DELETE ON %s '
                 'FOR EACH ROW EXECUTE FUNCTION basalt.realtime_capture(%s)', t, cols);
END $$;

CREATE FUNCTION basalt.realtime_enable(t text) RETURNS void
  LANGUAGE sql AS $$ SELECT basalt.realtime_enable(t::regclass) $$;

CREATE FUNCTION basalt.realtime_disable(t regclass) RETURNS void
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  EXECUTE format('DROP TRIGGER IF EXISTS basalt_realtime ON %s', t);
END $$;

CREATE FUNCTION basalt.realtime_disable(t text) RETURNS void
  LANGUAGE sql AS $$ SELECT basalt.realtime_disable(t::regclass) $$;

REVOKE ALL ON FUNCTION basalt.realtime_capture(), basalt.realtime_stamp(),
  basalt.realtime_enable(regclass), basalt.realtime_enable(text),
  basalt.realtime_disable(regclass), basalt.realtime_disable(text) FROM PUBLIC;
