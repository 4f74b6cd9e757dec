-- Realtime visibility asked of PostgreSQL for each page of events (docs/realtime.md, "Visibility").
--
-- 1. A delete now captures the row before it (old_row), as an update does: the delete is
--    sent only to subscribers whose policies let them see that row.
-- 2. basalt.realtime_policy(table): asked as the subscriber's role (basalt_user or
--    basalt_anon) for each page of events, which rows of the table it sees, from the
--    catalog as it is then: PostgreSQL's own row_security_active() (row-level security
--    on, not the owner, no BYPASSRLS, row_security not off), the SELECT and ALL policies whose roles the
--    current role has the privileges of (pg_has_role … 'USAGE': how PostgreSQL picks the
--    policies of a statement, so a NOINHERIT membership gives none), their USING
--    expressions as stored (pg_get_expr), permissive ones OR-ed, restrictive ones AND-ed,
--    none permissive → nothing; and USAGE on the table's schema. Not cached: a policy
--    dropped or created applies to the next page of events evaluated.
-- The row before is kept for every update and delete; a changed primary key is, as
-- before, a delete of the old key and an insert of the new.
CREATE OR REPLACE FUNCTION basalt.realtime_capture() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  before_row jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END;
  after_row jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END;
  before_key jsonb := CASE WHEN TG_OP <> 'INSERT' THEN
    (SELECT jsonb_object_agg(k, before_row -> k) FROM unnest(TG_ARGV) AS k) END;
  after_key jsonb := CASE WHEN TG_OP <> 'DELETE' THEN
    (SELECT jsonb_object_agg(k, after_row -> k) FROM unnest(TG_ARGV) AS k) END;
BEGIN
  IF TG_OP = 'UPDATE' AND before_key IS DISTINCT FROM after_key THEN
    INSERT INTO basalt.realtime_outbox (rel_schema, rel_name, action, pk, new_row, old_row)
    VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, 'delete', before_key, NULL, before_row),
           (TG_TABLE_SCHEMA, TG_TABLE_NAME, 'insert', after_key, after_row, NULL);
  ELSE
    INSERT INTO basalt.realtime_outbox (rel_schema, rel_name, action, pk, new_row, old_row)
    VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, lower(TG_OP), coalesce(after_key, before_key), after_row, before_row);
  END IF;
  RETURN NULL;
END $$;

-- The condition under which the current role sees rows of `t`, as SQL over the table's
-- columns: NULL when it may not use the table's schema, 'true' when row-level security
-- does not apply to it, else its policies' USING expressions combined. SECURITY INVOKER:
-- called as the subscriber's role, so PostgreSQL answers for that role. The expressions
-- are deparsed under this function's search_path, so every name in them is
-- schema-qualified as it was resolved when the policy was made.
CREATE FUNCTION basalt.realtime_policy(t regclass) RETURNS text
  LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  nsp oid;
  cond text;
BEGIN
  SELECT c.relnamespace INTO nsp FROM pg_class c WHERE c.oid = t;
  IF nsp IS NULL OR NOT has_schema_privilege(nsp, 'USAGE') THEN
    RETURN NULL;
  END IF;
  IF NOT row_security_active(t) THEN
    RETURN 'true';
  END IF;
  SELECT '(' || coalesce(string_agg(p.e, ' OR ') FILTER (WHERE p.polpermissive), 'false') || ')'
         || coalesce(string_agg(' AND ' || p.e, '') FILTER (WHERE NOT p.polpermissive), '')
    INTO cond
    FROM (SELECT pol.polpermissive, '(' || pg_get_expr(pol.polqual, pol.polrelid) || ')' AS e
            FROM pg_policy pol
           WHERE pol.polrelid = t AND pol.polcmd IN ('r', '*') AND pol.polqual IS NOT NULL
             AND (0::oid = ANY (pol.polroles)
                  OR EXISTS (SELECT 1 FROM unnest(pol.polroles) r WHERE pg_has_role(current_user, r, 'USAGE')))) p;
  RETURN cond;
END $$;

REVOKE ALL ON FUNCTION basalt.realtime_policy(regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION basalt.realtime_policy(regclass) TO basalt_user, basalt_anon;
