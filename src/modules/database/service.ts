/**
 * The Database API service: whitelist, catalog check, statement, execution,
 * value decoding and Postgres error mapping. No HTTP here; routes.ts calls it
 * with the verified key principal and the request body.
 */
import { PgError, type Db, type Queryable, type QueryResult, type WaitOptions, type WaitStats } from '../../db/engine';
import { AppError, Errors } from '../../http/errors';
import type { ApiKeyPrincipal } from '../../http/api-key-guard';
import type { Platform } from '../../platform';
import type { KeyService } from '../keys/service';
import type { AuthService } from '../auth/service';
import { databaseTypes, type TypesRole } from './types';
import { Catalog, isPlatformSchema, type Built, type IdentityRole, type Table } from './catalog';
import { DbErrors } from './errors';
import type { QueryBody, QueryResultData } from './model';
import { answerOf, buildStatement, type Access, type Statement } from './query-builder';
import { TransactionRegistry } from './transaction-registry';
import { lockTimeoutMs, mapDbError } from './pg-errors';
import { openApiPool } from './api-pool';
import {
  ANON,
  DB_ROLES,
  asIdentityAtOnce,
  assumeIdentity,
  checkIdentitySupport,
  type Identity,
  type IdentitySupport,
} from './identity';
import { secureIdentities } from './authenticator';
import { authorize, holdsAnything, readAs, readWithin } from './access';
import { isUserOwner, ownerOf, sessionOf, type DbCaller } from './caller';

/**
 * Where a service key's statements outside a transaction run: each on its own, waiting for the
 * pool as the key's work (`wait`). On external PostgreSQL one whose values a batch takes
 * (strings, finite numbers, nulls: every API statement's, an `in` list being an array literal)
 * is a batch of one (`Db.atOnce`), on the pool's wire path as a user's are (src/db/external-wire.ts): its
 * own implicit transaction, as it was on the driver, prepared per connection by its text and
 * read by Basalt's own reader instead of a query object of the driver's per statement. Where
 * that path is not spoken, `atOnce` runs a statement on its own as a query of the pool. On the
 * embedded engine the pool's query already runs such a statement as a batch of one.
 */
function alone(db: Db, wait: WaitOptions): Queryable {
  const waiting = db.waitAs(wait);
  if (db.kind !== 'external') return waiting;
  return {
    // atOnce decides whether the values go as a batch, and runs one statement it cannot batch as `waiting` would.
    query: async <T>(sql: string, params: unknown[] = []) =>
      (await db.atOnce([{ sql, params }], wait))[0] as QueryResult<T>,
    exec: waiting.exec,
  };
}

export class DatabaseService {
  readonly catalog: Catalog;
  readonly transactions: TransactionRegistry;
  /** Wait counters of the Database API's own pool (external PostgreSQL; embedded: none, the platform's). */
  waitStats: () => WaitStats | undefined = () => undefined;
  /**
   * Statements of the Database API's requests handed to the database (an identity's own setup
   * not counted): read by the test that proves a request with relations, aggregates or a total
   * is one statement (test/database/relations.test.ts).
   */
  statementsSent = 0;

  constructor(
    private readonly p: Platform,
    /** Connection used for service keys' statements (its own pool on external Postgres, see api-pool.ts). */
    private readonly apiDb: () => Promise<Db>,
    /** Connection used for users' and anon statements (the authenticator's pool: authenticator.ts). */
    readonly identityDb: () => Promise<Db>,
    /** Whether statements can run as basalt_user / basalt_anon (identity.ts, checkIdentitySupport). */
    readonly identities: boolean,
  ) {
    const schema = p.settings.get('database.data_schema');
    if (isPlatformSchema(schema))
      throw new Error(
        `database.data_schema: '${schema}' is a platform schema; application tables belong in their own schema (default public)`,
      );
    this.catalog = new Catalog(p.db, { schema });
    const external = p.db.kind === 'external';
    this.transactions = new TransactionRegistry({
      // On external PostgreSQL on the API pool's wire path, where its statements outside a
      // transaction go too: a statement is one write and one read of Basalt's own, not the driver's.
      // A user's on the identities' pool, never on a connection of the platform's role.
      // Every answer in it bounded as it is read (a write's too: one refused aborts the transaction).
      begin: async (setup, wait) =>
        (await (isUserOwner(wait.key) ? this.identityDb() : this.apiDb())).begin({
          setup,
          onWire: true,
          maxAnswerBytes: p.settings.get('db.max_response_bytes'),
          ...wait,
        }),
      idleTimeoutMs: () => p.settings.get('db.transaction_idle_timeout_ms'),
      maxLifetimeMs: () => p.settings.get('db.transaction_max_lifetime_ms'),
      maxPerKey: () => p.settings.get('db.max_transactions_per_key'),
      // Server-side backstops on external Postgres: the idle timer here is the primary
      // mechanism; idle_in_transaction_session_timeout frees the connection (and its
      // locks) even if this process died. lock_timeout < statement_timeout, so a wait
      // for another transaction's lock is its own answer (503 lock_timeout). PGlite is
      // one in-process session, so only the timer applies.
      setup: () => {
        if (!external) return [];
        const stmt = p.settings.get('db.statement_timeout_ms');
        const idle = p.settings.get('db.transaction_idle_timeout_ms');
        return [
          `SET LOCAL statement_timeout = ${Math.trunc(stmt)}`,
          `SET LOCAL lock_timeout = ${lockTimeoutMs(stmt)}`,
          `SET LOCAL idle_in_transaction_session_timeout = ${Math.trunc(idle) + 5000}`,
        ];
      },
      onError: (msg, cause) => p.log.warn(msg, { cause }),
    });
  }

  /**
   * TypeScript declarations of the data schema as `role` sees it (./types.ts), from a fresh
   * catalog: `basalt types`, the admin API and the panel's Data screen call this.
   */
  async types(role: TypesRole, whitelist?: readonly string[]): Promise<string> {
    return databaseTypes(await this.catalog.refresh(), this.catalog.schema, role, whitelist);
  }

  /** Whitelist first: a table outside it is refused before anything reveals whether it exists. */
  checkWhitelist(principal: ApiKeyPrincipal, entity: unknown): void {
    if (typeof entity !== 'string') return;
    if (!principal.tables.includes(entity)) throw DbErrors.forbidden(entity);
  }

  /**
   * Users' own data, before the body is looked at: whether the role of a user or anon
   * caller holds anything on the entity. A user without a grant gets 403 like a whitelist
   * miss (an unknown table answers the same); anon gets exactly the answer it got before
   * the feature (`refuse`), and so does every non-key caller while the feature is off.
   * A table the cached catalog shows without a grant is looked up once more (rate-limited),
   * so a grant just made applies at once.
   */
  async admit(caller: DbCaller, body: unknown, refuse: () => Promise<never>): Promise<void> {
    if (caller.kind === 'key') return;
    if (!this.identities) await refuse();
    const { entity, transaction_id } = (body ?? {}) as { entity?: unknown; transaction_id?: unknown };
    if (typeof entity !== 'string') {
      if (caller.kind === 'anon') await refuse();
      return; // the body's shape: 400 from validation
    }
    let table: Table | undefined;
    if (transaction_id !== undefined && this.p.db.kind === 'embedded') {
      // An open transaction holds the embedded database: no catalog load may wait for it
      // here. A user's request is checked when planned, through the transaction; anon
      // holds no transaction (404 or, where nothing is granted, the answer of before),
      // which the last snapshot, however old, is enough to tell.
      if (caller.kind === 'user') return;
      table = (this.catalog.latest() ?? (await this.catalog.get())).tables.get(entity);
    } else {
      table = (await this.catalog.table(entity)).table;
      if (table && !holdsAnything(table, caller.kind)) {
        const fresh = await this.catalog.refreshOnMiss();
        table = fresh ? fresh.tables.get(entity) : table;
      }
    }
    if (holdsAnything(table, caller.kind)) return;
    if (caller.kind === 'anon') await refuse();
    throw DbErrors.notGranted(entity, DB_ROLES.user);
  }

  /**
   * Run one request, optionally inside an open transaction of its caller. Outside a
   * transaction it waits for the database as its caller's work (a key's or user's fair
   * share; anon callers share one), and not at all once `signal` (the request's) says
   * the client has gone (src/db/wait-gate.ts).
   */
  async query(caller: DbCaller, body: QueryBody, signal?: AbortSignal): Promise<QueryResultData> {
    const wait: WaitOptions = {
      key: caller.kind === 'anon' ? 'anon' : ownerOf(caller),
      signal,
      // A select's and an aggregate's rows are bounded as they are read; a write's in its statement
      // (query-builder.ts, `bounded`).
      maxAnswerBytes:
        body.action === 'select' || body.action === 'aggregate'
          ? this.p.settings.get('db.max_response_bytes')
          : undefined,
    };
    if (caller.kind === 'key') {
      this.checkWhitelist(caller.key, body.entity);
      const keyAccess = readWithin(caller.key.tables);
      if (body.transaction_id !== undefined)
        return this.transactions.run(body.transaction_id, caller.key.id, undefined, (tx) =>
          this.execute(body, tx, true, undefined, undefined, keyAccess),
        );
      return this.execute(body, alone(await this.apiDb(), wait), false, undefined, wait, keyAccess);
    }
    const as = caller.kind === 'user' ? caller.identity : ANON;
    if (body.transaction_id !== undefined) {
      // Anon never holds a transaction: any id is unknown to it.
      if (caller.kind === 'anon') throw DbErrors.txNotFound();
      return this.transactions.run(body.transaction_id, ownerOf(caller), sessionOf(caller), (tx) =>
        this.execute(body, tx, true, as),
      );
    }
    return this.execute(body, await this.identityDb(), false, as, wait);
  }

  /**
   * The statement of a request, built against the catalog (reloaded once when it does not
   * know the table or a column: `Catalog.build`). Without waiting on a fresh catalog.
   * With `role` (users' own data) the request is first checked against the role's grants.
   */
  private plan(
    body: QueryBody,
    via: Queryable | undefined,
    role?: IdentityRole,
    keyAccess?: Access,
  ): Built<Statement> | Promise<Built<Statement>> {
    const maxLimit = this.p.settings.get('db.max_limit');
    // A write's RETURNING rows are bounded by the database (docs/database.md, "Answer size").
    const maxBytes = this.p.settings.get('db.max_response_bytes');
    const make = role
      ? (table: Table) => {
          const a = authorize(body, table, role);
          return buildStatement(a.body, table, { maxLimit, maxBytes, returning: a.returning, access: readAs(role) });
        }
      : (table: Table) => buildStatement(body, table, { maxLimit, maxBytes, access: keyAccess });
    return this.catalog.build(body.entity, via, make, {
      table: () =>
        role
          ? DbErrors.notGranted(body.entity, DB_ROLES[role])
          : DbErrors.invalid('entity', `unknown entity '${body.entity}' (no such table in the data schema)`),
      name: (e) =>
        DbErrors.invalid(e.path, e.detail ?? `unknown field '${e.name}' of entity '${e.table ?? body.entity}'`),
    });
  }

  /**
   * Plan and run one request on `q`: the API connection, or an open transaction
   * (`inTx`). With `as` the statement runs as that identity: in a transaction of its
   * own (identity.ts), or in the open transaction, which took the identity at begin.
   */
  private async execute(
    body: QueryBody,
    q: Db | Queryable,
    inTx: boolean,
    as?: Identity,
    wait?: WaitOptions,
    keyAccess?: Access,
  ): Promise<QueryResultData> {
    // Inside a transaction on the embedded engine the transaction holds the only
    // connection, so catalog reads must go through it.
    const via = inTx && this.p.db.kind === 'embedded' ? q : undefined;
    const planned = this.plan(body, via, as?.role, keyAccess);
    const { value: st, snap, table } = planned instanceof Promise ? await planned : planned;
    try {
      this.statementsSent++;
      // With an identity outside a transaction: one round trip with the identity's own setup.
      const res =
        as && !inTx
          ? (await asIdentityAtOnce(q as Db, as, [{ sql: st.sql, params: st.params }], wait))[0]!
          : await q.query(st.sql, st.params);
      return answerOf(st, res as QueryResult<Record<string, unknown>>);
    } catch (err) {
      if (err instanceof AppError) throw err;
      // A policy's WITH CHECK refused the row, or the role lacks a privilege the catalog
      // did not show yet (e.g. a sequence): 403 naming the table, never a 500.
      if (as && err instanceof PgError && err.code === '42501') throw DbErrors.policyRefused(table.name, err);
      // The probe runs outside the transaction; on the embedded engine that would wait for it.
      const probe = inTx && this.p.db.kind === 'embedded' ? undefined : await this.apiDb();
      throw await mapDbError(err, {
        statement: st,
        table,
        snap,
        catalog: this.catalog,
        probe,
        timeoutMs: this.p.settings.get('db.statement_timeout_ms'),
      });
    }
  }

  /**
   * Open a transaction owned by a key, or by a user (then it runs as that user throughout).
   * `signal`: the request's; a begin whose client has gone never starts.
   */
  async begin(
    caller: DbCaller & { kind: 'key' | 'user' },
    signal?: AbortSignal,
  ): Promise<{ transaction_id: string; expires_at: string }> {
    const init = caller.kind === 'user' ? (tx: Queryable) => assumeIdentity(tx, caller.identity) : undefined;
    const { id, expiresAt } = await this.transactions.begin(ownerOf(caller), init, signal, sessionOf(caller));
    return { transaction_id: id, expires_at: expiresAt.toISOString() };
  }

  /**
   * Sessions changed (Public Auth's announcement, from any instance: a session id, or
   * `user:<id>` for all of a user's): a user's transactions whose session was revoked, or
   * whose user was disabled, are rolled back at once, releasing their locks (and, on the
   * embedded engine, the database) instead of waiting for their idle timeout.
   */
  async sessionsChanged(key: string, state: (sessionId: string) => Promise<{ problem?: string } | null>) {
    if (!key.startsWith('user:')) {
      // A session announced by itself was revoked (logout, refresh-token reuse, an admin).
      await this.transactions.rollbackWhere((e) => e.session === key);
      return;
    }
    const ended = new Set<string>();
    for (const sid of this.transactions.sessionsOf(key)) {
      const st = await state(sid);
      if (!st || st.problem) ended.add(sid);
    }
    if (ended.size) await this.transactions.rollbackWhere((e) => e.owner === key && ended.has(e.session ?? ''));
  }

  async commit(
    caller: DbCaller & { kind: 'key' | 'user' },
    id: string,
  ): Promise<{ transaction_id: string; status: 'committed' }> {
    try {
      await this.transactions.commit(id, ownerOf(caller), sessionOf(caller));
    } catch (err) {
      if (err instanceof AppError) throw err;
      // Deferred constraints are checked at commit.
      const snap = await this.catalog.get();
      throw await mapDbError(err, {
        snap,
        catalog: this.catalog,
        timeoutMs: this.p.settings.get('db.statement_timeout_ms'),
      });
    }
    return { transaction_id: id, status: 'committed' };
  }

  async rollback(
    caller: DbCaller & { kind: 'key' | 'user' },
    id: string,
  ): Promise<{ transaction_id: string; status: 'rolled_back' }> {
    await this.transactions.rollback(id, ownerOf(caller), sessionOf(caller));
    return { transaction_id: id, status: 'rolled_back' };
  }
}

/**
 * The other services the Database API uses: keys and Public Auth's sessions, whose
 * revocation ends the key's or the user's transactions.
 */
export interface DatabaseDeps {
  keys: KeyService;
  auth: Pick<AuthService, 'sessions'>;
}

/**
 * Create the service; the API pool opens on first use. Start-up checks that the
 * platform's role can run statements as users and anon (identity.ts); when it cannot,
 * users' own data stays off with one warning, and the Database API answers users and
 * anon exactly as it did before the feature (docs/database.md).
 */
export async function createDatabaseService(p: Platform, { keys, auth }: DatabaseDeps): Promise<DatabaseService> {
  let userUrl: string | undefined;
  const pool = openApiPool(p, () => userUrl);
  const secure = async (): Promise<IdentitySupport> => {
    const s = await secureIdentities(p.db, {
      platform: p.settings.get('database.url'),
      user: p.settings.get('database.user_url'),
    });
    if (s.ok) userUrl = s.url;
    return s;
  };
  const support = await checkIdentitySupport(p.db, secure, pool.identities);
  if (!support.ok)
    p.log.warn(
      `users' own data is off: ${support.reason}; see docs/database.md, "The platform's role on a managed server"`,
    );
  const svc = new DatabaseService(p, pool.get, pool.identities, support.ok);
  svc.waitStats = pool.stats;
  // A revoked key's transactions end at once, on every instance (docs/database.md, Transactions),
  // and its requests still waiting for the database are refused.
  keys.onRevoke((keyId) => {
    pool.cancelWaits(keyId, Errors.unauthorized());
    return svc.transactions.rollbackKey(keyId);
  });
  // A user's session revoked or the user disabled (any instance): their transactions end.
  const sessions = auth.sessions;
  sessions.onInvalidate((key) => {
    svc
      .sessionsChanged(key, async (sid) => sessions.cached(sid) ?? (await sessions.load(sid)))
      .catch((err) => p.log.warn('ending the transactions of ended sessions failed', { cause: err }));
  });
  // Open API transactions end first, as soon as a stop begins: on the embedded engine they
  // hold the database that requests in flight and the other shutdown steps (mail jobs given
  // back, instance records) need. Whatever is still open after the drain is rolled back first.
  p.onShutdown(() => svc.transactions.close(), { drain: true });
  p.onShutdown(() => svc.transactions.rollbackAll(), { first: true });
  p.onShutdown(() => pool.close());
  return svc;
}
