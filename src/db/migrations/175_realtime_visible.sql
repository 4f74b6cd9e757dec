-- Realtime visibility asked of PostgreSQL at delivery (docs/realtime.md, "Visibility").
--
-- 1. A delete now captures the row before it (old_row), as an update does: the delete is
--    sent only to subscribers whose policies let them see that row.
-- 2. basalt.realtime_visible(table, rows): which of the captured rows the current role
--    (the subscriber's identity: basalt_user or basalt_anon, basalt.uid() set) may see,
--    decided in the one statement that evaluates them, from the catalog as it is then:
--    PostgreSQL's own row_security_active() (row-level security on, not the owner, no
--    BYPASSRLS, row_security not off), the SELECT and ALL policies whose roles the
--    current role has the privileges of (pg_has_role … 'USAGE': how PostgreSQL picks the
--    policies of a statement, so a NOINHERIT membership gives none), their USING
--    expressions as stored (pg_get_expr), permissive ones OR-ed, restrictive ones AND-ed,
--    none permissive → nothing; and USAGE on the table's schema. No cache: a policy
--    dropped or created applies to the next event evaluated.
CREATE OR REPLACE FUNCTION basalt.realtime_capture() RETURNS trigger
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
    INSERT INTO basalt.realtime_outbox (rel_schema, rel_name, action, pk, new_row, old_row)
    VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, 'delete', old_pk, NULL, old_r),
           (TG_TABLE_SCHEMA, TG_TABLE_NAME, 'insert', new_pk, new_r, NULL);
  ELSIF TG_OP = 'DELETE' THEN
    -- The row before: the delete goes to the subscribers who could see it (its key only).
    INSERT INTO basalt.realtime_outbox (rel_schema, rel_name, action, pk, old_row)
    VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, 'delete', old_pk, old_r);
  ELSE
    INSERT INTO basalt.realtime_outbox (rel_schema, rel_name, action, pk, new_row, old_row)
    VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, lower(TG_OP), new_pk, new_r, old_r);
  END IF;
  RETURN NULL;
END $$;

-- The ordinal (1-based) of each row of `images` (a JSON array of to_jsonb rows of `t`)
-- the current role may see. SECURITY INVOKER: it runs as the subscriber's identity, so the
-- policies' expressions (and any subquery in them) run under that identity's own grants
-- and policies. The expressions are deparsed and run under this function's search_path,
-- so every name in them is schema-qualified as it was resolved when the policy was made.
CREATE FUNCTION basalt.realtime_visible(t regclass, images jsonb) RETURNS SETOF bigint
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  rel name;
  nsp oid;
  cond text := 'true';
BEGIN
  SELECT c.relname, c.relnamespace INTO rel, nsp FROM pg_class c WHERE c.oid = t;
  IF rel IS NULL OR NOT has_schema_privilege(nsp, 'USAGE') THEN
    RETURN;
  END IF;
  IF row_security_active(t) THEN
    SELECT '(' || coalesce(string_agg(p.e, ' OR ') FILTER (WHERE p.polpermissive), 'false') || ')'
           || coalesce(string_agg(' AND ' || p.e, '') FILTER (WHERE NOT p.polpermissive), '')
      INTO cond
      FROM (SELECT pol.polpermissive, '(' || pg_get_expr(pol.polqual, pol.polrelid) || ')' AS e
              FROM pg_policy pol
             WHERE pol.polrelid = t AND pol.polcmd IN ('r', '*') AND pol.polqual IS NOT NULL
               AND (0::oid = ANY (pol.polroles)
                    OR EXISTS (SELECT 1 FROM unnest(pol.polroles) r WHERE pg_has_role(current_user, r, 'USAGE')))) p;
  END IF;
  -- The derived table takes the table's name, so a policy's `notes.owner_id` finds its column.
  RETURN QUERY EXECUTE format(
    'SELECT __basalt_n FROM (SELECT j.n AS __basalt_n, r.* FROM jsonb_array_elements($1) WITH ORDINALITY AS j(value, n), '
    'jsonb_populate_record(NULL::%s, j.value) AS r) AS %I WHERE %s', t, rel, cond)
    USING images;
END $$;

REVOKE ALL ON FUNCTION basalt.realtime_visible(regclass, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION basalt.realtime_visible(regclass, jsonb) TO basalt_user, basalt_anon;
