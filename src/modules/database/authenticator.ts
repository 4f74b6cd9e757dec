/**
 * The login role that users' and anonymous callers' statements run on, on external
 * PostgreSQL (docs/database.md, "Who is which role"): the authenticator pattern of
 * PostgREST and Supabase. A connection's session user decides which roles `SET ROLE` (and
 * `set_config('role', …)`) may reach, so a statement on a connection that logged in as the
 * platform's role could always climb back to it, from a policy expression or anything else
 * it evaluates. User and anon statements therefore run on connections of their own that
 * log in as a role that is `NOINHERIT` (it holds nothing itself) and a member of
 * `basalt_user` and `basalt_anon` only, and the platform's work keeps its own connections.
 *
 * Basalt creates and keeps that role itself (`basalt_auth_<database>`: role names are
 * cluster-wide, so each database has its own) with a generated password kept in
 * `basalt.secrets` beside the signing key, sent to the server only as a SCRAM verifier.
 * An operator whose platform role may not create roles names one in `database.user_url`
 * instead. Either way start-up checks its shape (`checkAuthenticator`) and keeps users'
 * own data off when it reaches more than it may.
 *
 * The embedded engine has one session, whose user is the superuser: there, user statements
 * cannot call `set_config` at all (`guardEmbedded`), which PostgreSQL enforces.
 */
import { createHash } from 'node:crypto';
import { PgError, quoteIdent, type Db, type Queryable } from '../../db/engine';
import { getOrCreateSecret } from '../../db/secrets';
import { scramVerifier } from '../../db/wire/auth';
import { DB_ROLES, type IdentitySupport } from './identity';

/** The authenticator of database `name`: readable where the name allows, else a hash of it. */
export function authenticatorName(database: string): string {
  if (/^[a-z_][a-z0-9_]*$/.test(database) && database.length <= 51) return `basalt_auth_${database}`;
  return `basalt_auth_${createHash('sha256').update(database).digest('hex').slice(0, 16)}`;
}

export type Provisioned = { ok: true; url: string; role: string } | { ok: false; reason: string };

/**
 * The URL user statements connect with: `database.user_url` when set, else that of the
 * managed authenticator, created (or brought back to its shape and password) first.
 */
export async function provisionAuthenticator(db: Db, platformUrl: string, userUrl: string): Promise<Provisioned> {
  if (userUrl) {
    const role = decodeURIComponent(new URL(userUrl).username);
    if (!role) return { ok: false, reason: 'database.user_url names no user' };
    return { ok: true, url: userUrl, role };
  }
  const { rows } = await db.query<{ database: string }>('SELECT current_database() AS database');
  const role = authenticatorName(rows[0]!.database);
  const password = await getOrCreateSecret(db, 'authenticator_password', 32);
  const verifier = scramVerifier(password);
  const name = quoteIdent(role);
  try {
    await db.transaction(async (tx) => {
      // Two instances starting at once on one database: one at a time.
      await tx.query("SELECT pg_advisory_xact_lock(hashtext('basalt_authenticator'))");
      const found = await tx.query('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [role]);
      // The verifier is base64 and `$:` only (made above): safe as a literal; roles take no bind parameters.
      const attributes = `LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '${verifier}'`;
      await tx.exec(found.rows.length ? `ALTER ROLE ${name} ${attributes}` : `CREATE ROLE ${name} ${attributes}`);
      await tx.exec(`GRANT ${DB_ROLES.user}, ${DB_ROLES.anon} TO ${name}`);
    });
  } catch (e) {
    if (!(e instanceof PgError)) throw e;
    return {
      ok: false,
      reason: `the platform role may not create or update role ${role} (${e.message}); give it CREATEROLE, or set database.user_url`,
    };
  }
  const u = new URL(platformUrl);
  u.username = encodeURIComponent(role);
  u.password = encodeURIComponent(password);
  return { ok: true, url: u.toString(), role };
}

/**
 * Why the authenticator `role` may not serve, if it may not: it must not be a superuser or
 * able to create roles or databases, replicate or bypass row-level security; it must not
 * inherit privileges; and no role it can become may be the platform's (`platformRole`) or one
 * with any of those attributes. Run on a platform connection.
 */
export async function checkAuthenticator(db: Queryable, role: string, platformRole: string): Promise<string | null> {
  const { rows } = await db.query<{ rolname: string; risky: boolean; inherit: boolean }>(
    `SELECT r.rolname, (r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls) AS risky,
            r.rolinherit AS inherit
       FROM pg_catalog.pg_roles r
      WHERE pg_catalog.pg_has_role($1, r.oid, 'MEMBER')`,
    [role],
  );
  if (role === platformRole) return `role ${role} is the platform's own role`;
  const self = rows.find((r) => r.rolname === role);
  if (!self) return `role ${role} does not exist`;
  if (self.inherit) return `role ${role} must be NOINHERIT (ALTER ROLE ${quoteIdent(role)} NOINHERIT)`;
  const reached = rows.filter((r) => r.rolname !== role);
  if (reached.some((r) => r.rolname === platformRole))
    return `role ${role} can become the platform's role ${platformRole}`;
  const risky = [self, ...reached].filter((r) => r.risky).map((r) => r.rolname);
  if (risky.length) return `role ${role} is or can become a privileged role (${risky.join(', ')})`;
  for (const r of Object.values(DB_ROLES))
    if (!reached.some((x) => x.rolname === r)) return `role ${role} is not a member of ${r}`;
  return null;
}

/** The function user statements must never call on the embedded engine: it switches roles. */
const SET_CONFIG = 'pg_catalog.set_config(text, text, boolean)';

/**
 * The embedded engine: the session's user is the superuser, which any role may `SET ROLE`
 * back to, so user statements may not call `set_config` (the only way an expression can
 * change a setting); the platform, the superuser, still does. Idempotent; checked after.
 */
export async function guardEmbedded(db: Queryable): Promise<string | null> {
  await db.exec(`REVOKE EXECUTE ON FUNCTION ${SET_CONFIG} FROM PUBLIC`);
  for (const role of Object.values(DB_ROLES)) {
    const { rows } = await db.query<{ may: boolean }>(
      `SELECT pg_catalog.has_function_privilege($1, '${SET_CONFIG}', 'EXECUTE') AS may`,
      [role],
    );
    if (rows[0]?.may) return `${role} may still call set_config`;
  }
  return null;
}

/**
 * Start-up (identity.ts, `checkIdentitySupport`): make sure no user or anon statement can
 * become the platform's role. Embedded: `guardEmbedded`. External: the authenticator
 * provisioned and its shape checked; `url` is where user statements then connect.
 */
export async function secureIdentities(
  db: Db,
  urls: { platform: string; user: string },
): Promise<IdentitySupport & { url?: string }> {
  if (db.kind === 'embedded') {
    const why = await guardEmbedded(db);
    return why ? { ok: false, reason: why } : { ok: true };
  }
  const made = await provisionAuthenticator(db, urls.platform, urls.user);
  if (!made.ok) return made;
  const { rows } = await db.query<{ me: string }>('SELECT current_user AS me');
  const why = await checkAuthenticator(db, made.role, rows[0]!.me);
  return why ? { ok: false, reason: why } : { ok: true, url: made.url };
}
