-- Users' own data (docs/database.md, "Users' own data"): the two roles a Database API
-- request of a signed-in user or of an anonymous caller runs as, and the functions its
-- row-level policies read its identity with.
--
-- Roles are cluster-wide: several databases of one server (several instances, test
-- databases) share them, and two instances may migrate at the same moment, so each role
-- is created only when missing and a concurrent creation is tolerated. A platform role
-- that may not create roles (a managed server without CREATEROLE) gets a warning here,
-- not a failed start: the feature then stays off until the roles exist and the platform
-- role may SET ROLE to them (checked at start-up, src/modules/database/identity.ts).
DO $$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['basalt_anon', 'basalt_user'] LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', r);
      EXCEPTION
        WHEN duplicate_object OR unique_violation THEN NULL; -- another database's migration made it just now
        WHEN insufficient_privilege THEN
          RAISE WARNING 'basalt: role % is missing and this role may not create it; users'' own data stays off until it exists (docs/database.md)', r;
      END;
    END IF;
    -- The platform's own role switches to it with SET LOCAL ROLE (superusers always may).
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r)
       AND NOT pg_catalog.pg_has_role(current_user, r, 'MEMBER') THEN
      BEGIN
        EXECUTE format('GRANT %I TO %I', r, current_user);
      EXCEPTION
        WHEN insufficient_privilege OR invalid_grant_operation THEN
          RAISE WARNING 'basalt: this role may not switch to % (GRANT % TO %); users'' own data stays off (docs/database.md)', r, r, current_user;
      END;
    END IF;
  END LOOP;
END
$$;

-- Of the platform schema the two roles reach these three functions and nothing else:
-- no table of basalt is granted to PUBLIC, and no other function of it is executable by
-- PUBLIC, now or later (default privileges of the role that runs the migrations).
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA basalt FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA basalt REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- The identity of the statement running now, set with set_config(…, true) by the
-- platform inside the statement's own transaction and nowhere else. An empty string is
-- what a setting reads once it has been set and reset in this session: it means unset,
-- as for a service key's statement or the platform's own.
CREATE FUNCTION basalt.uid() RETURNS uuid
  LANGUAGE sql STABLE PARALLEL SAFE
  AS $$ SELECT NULLIF(pg_catalog.current_setting('basalt.uid', true), '')::uuid $$;

CREATE FUNCTION basalt.role() RETURNS text
  LANGUAGE sql STABLE PARALLEL SAFE
  AS $$ SELECT NULLIF(pg_catalog.current_setting('basalt.role', true), '') $$;

CREATE FUNCTION basalt.jwt() RETURNS jsonb
  LANGUAGE sql STABLE PARALLEL SAFE
  AS $$ SELECT COALESCE(NULLIF(pg_catalog.current_setting('basalt.jwt', true), '')::jsonb, '{}'::jsonb) $$;

-- They reveal nothing but the caller's own identity: any role may call them (an
-- operator's psql session or reporting role evaluating the same policies included).
GRANT EXECUTE ON FUNCTION basalt.uid(), basalt.role(), basalt.jwt() TO PUBLIC;

-- USAGE of the schema, to reach the functions. Roles created later (by an operator,
-- on a managed server) get it at start-up instead (src/modules/database/identity.ts).
DO $$
BEGIN
  IF (SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname IN ('basalt_anon', 'basalt_user')) = 2 THEN
    GRANT USAGE ON SCHEMA basalt TO basalt_anon, basalt_user;
  END IF;
END
$$;
