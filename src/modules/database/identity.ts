/**
 * The one way to run statements as a site user or as an anonymous caller
 * (docs/database.md, "Users' own data"). Everything that must see rows as a user sees
 * them — the Database API, realtime's visibility checks, the panel's "try as a user" —
 * goes through `asIdentity` (a transaction of its own) or `assumeIdentity` (a
 * transaction already open, e.g. one of the Database API's transactions).
 *
 * Where: on connections that cannot become the platform's role (authenticator.ts): on
 * external PostgreSQL a pool logged in as the authenticator, on the embedded engine the one
 * session, where user roles may not call `set_config`.
 *
 * How: inside the transaction, one statement sets `basalt.uid`, `basalt.role` and
 * `basalt.jwt` (read by `basalt.uid()`, `basalt.role()`, `basalt.jwt()`) and the role
 * (`basalt_user` or `basalt_anon`), all with `set_config(…, true)`: the transaction-local
 * form of `SET LOCAL`, which takes bind parameters. All four end with the transaction, so
 * no later statement on the same pooled connection, or on the embedded engine's single
 * session, can see them; and on the embedded engine an open transaction holds the
 * database, so nothing else runs in between.
 *
 * @example
 * const rows = await asIdentity(db, userIdentity(user.userId, claims), (q) =>
 *   q.query('SELECT id FROM notes WHERE id = $1', [noteId]),
 * );
 */
import type { Db, KnownStatement, Queryable, QueryResult, WaitOptions } from '../../db/engine';

/** Who a statement runs as: a signed-in site user, or nobody signed in. */
export interface Identity {
  role: 'user' | 'anon';
  /** The user's id; null for anon. */
  uid: string | null;
  /** The verified access-token claims `basalt.jwt()` returns (at least sub, sid, email, email_verified); {} for anon. */
  claims: Record<string, unknown>;
}

/** The PostgreSQL role of each identity. */
export const DB_ROLES = { user: 'basalt_user', anon: 'basalt_anon' } as const;

export const ANON: Identity = Object.freeze({ role: 'anon', uid: null, claims: Object.freeze({}) }) as Identity;

/** A user's identity; never changed once made (the values its statements send are made once, on first use). */
export function userIdentity(uid: string, claims: Record<string, unknown>): Identity {
  return Object.freeze({ role: 'user', uid, claims });
}

const ASSUME_SQL =
  "SELECT set_config('basalt.uid', $1, true), set_config('basalt.role', $2, true), " +
  "set_config('basalt.jwt', $3, true), set_config('role', $4, true)";

/**
 * Inside an open transaction: run the rest of it as `id`. Lasts until the transaction
 * ends (commit or rollback); never call it outside one (it would then last for the
 * session, which Postgres refuses to scope: `set_config(…, true)` outside a transaction
 * block is a no-op with a warning).
 */
export async function assumeIdentity(tx: Queryable, id: Identity): Promise<void> {
  await tx.query(ASSUME_SQL, identityParams(id));
}

/** The values of ASSUME_SQL for each identity, made once: a user's identity serves all requests of one token (caller.ts). */
const paramsOf = new WeakMap<Identity, string[]>();

function identityParams(id: Identity): string[] {
  let params = paramsOf.get(id);
  if (!params) {
    params = [id.uid ?? '', id.role, JSON.stringify(id.claims), DB_ROLES[id.role]];
    paramsOf.set(id, params);
  }
  return params;
}

/**
 * Run `fn` in a transaction of its own as `id`: committed when it returns, rolled back
 * when it throws. The identity statement is not awaited before `fn` starts: statements on
 * one connection of external PostgreSQL run in the order they are sent, so `fn`'s first
 * statement runs after it and both go out together (one round trip less per request). If
 * the identity statement fails, its error is the one thrown (`fn`'s statements then fail
 * only because the transaction was aborted by it). `wait`: whose work it is while it waits
 * for the database (src/db/wait-gate.ts).
 */
export async function asIdentity<R>(
  db: Db,
  id: Identity,
  fn: (q: Queryable) => Promise<R>,
  wait?: WaitOptions,
): Promise<R> {
  const tx = await db.begin(wait);
  try {
    const assumed = assumeIdentity(tx, id);
    assumed.catch(() => {}); // awaited below, on every path
    // The embedded engine's statements are not queued by a connection: wait there.
    if (db.kind === 'embedded') await assumed;
    let out: R;
    try {
      out = await fn(tx);
    } catch (e) {
      await assumed;
      throw e;
    }
    await assumed;
    await tx.commit();
    return out;
  } catch (e) {
    await tx.rollback();
    throw e;
  }
}

/**
 * Run `statements` (all known up front) in a transaction of their own as `id`, and return
 * their results: the identity and the statements go out together (`Db.atOnce`), in one round
 * trip on external PostgreSQL and one exchange with the embedded engine, and the
 * transaction is the implicit one PostgreSQL opens for statements sent without a Sync between
 * them (on external PostgreSQL an explicit one where the driver path serves: BEGIN … COMMIT): the identity (`set_config(…, true)`) lasts until it ends, and no longer, whether it
 * commits or a statement fails. The first error is thrown (the identity's before the
 * statements', which then fail only because the transaction was aborted). `wait`: whose work
 * it is while it waits for the database (src/db/wait-gate.ts).
 */
export async function asIdentityAtOnce(
  db: Db,
  id: Identity,
  statements: KnownStatement[],
  wait?: WaitOptions,
): Promise<QueryResult<Record<string, unknown>>[]> {
  const results = await db.atOnce([{ sql: ASSUME_SQL, params: identityParams(id) }, ...statements], wait);
  return results.slice(1);
}

/**
 * Inside an open transaction that already runs as an identity: run the rest of it as `id`
 * instead. The role goes back to the session's first (`SET LOCAL ROLE NONE`): the identity
 * statement's `set_config` is the platform's to call, not a user role's (on the embedded
 * engine those may not call it at all: authenticator.ts, `guardEmbedded`).
 */
export async function switchIdentity(tx: Queryable, id: Identity): Promise<void> {
  const reset = tx.exec('SET LOCAL ROLE NONE');
  reset.catch(() => {}); // awaited below
  const assumed = assumeIdentity(tx, id);
  await reset;
  await assumed;
}

/** What start-up found: whether statements can run as users and anon, safely. */
export type IdentitySupport = { ok: true } | { ok: false; reason: string };

/**
 * Start-up check (docs/database.md, "The platform's role on a managed server"): both
 * roles exist and each may use schema basalt (granted here when missing: roles an operator
 * created after the platform migration ran); then `secure` makes sure no user statement can
 * climb back to the platform's role (authenticator.ts), and statements on `identities` (the
 * connections user statements run on) may switch to each role. Tried for real, in a
 * transaction that is rolled back.
 */
export async function checkIdentitySupport(
  db: Db,
  secure: () => Promise<IdentitySupport>,
  identities: () => Promise<Db>,
): Promise<IdentitySupport> {
  const found = await db.query<{ rolname: string; usage: boolean }>(
    `SELECT rolname, has_schema_privilege(oid, 'basalt', 'USAGE') AS usage
       FROM pg_catalog.pg_roles WHERE rolname IN ('basalt_anon', 'basalt_user')`,
  );
  const missing = Object.values(DB_ROLES).filter((r) => !found.rows.some((f) => f.rolname === r));
  if (missing.length) return { ok: false, reason: `role ${missing.join(' and ')} does not exist` };
  if (found.rows.some((r) => !r.usage)) {
    try {
      await db.exec('GRANT USAGE ON SCHEMA basalt TO basalt_anon, basalt_user');
    } catch {
      return {
        ok: false,
        reason: 'the platform role may not grant USAGE on schema basalt to basalt_anon, basalt_user',
      };
    }
  }
  const secured = await secure();
  if (!secured.ok) return secured;
  for (const role of ['anon', 'user'] as const) {
    try {
      await (await identities()).transaction(async (tx) => {
        await assumeIdentity(tx, role === 'anon' ? ANON : userIdentity(crypto.randomUUID(), {}));
        await tx.query('SELECT basalt.uid(), basalt.role(), basalt.jwt()');
        throw ROLLBACK;
      });
    } catch (e) {
      if (e !== ROLLBACK)
        return { ok: false, reason: `statements may not run as ${DB_ROLES[role]} (${(e as Error).message})` };
    }
  }
  return { ok: true };
}

const ROLLBACK = Symbol('rollback');
