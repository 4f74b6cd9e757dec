/**
 * The Database API service: whitelist, catalog check, statement, execution,
 * value decoding and Postgres error mapping. No HTTP here; routes.ts calls it
 * with the verified key principal and the request body.
 */
import type { Db, Queryable } from '../../db/engine';
import { AppError } from '../../http/errors';
import type { ApiKeyPrincipal } from '../../http/api-key-guard';
import type { Platform } from '../../platform';
import { Catalog, isPlatformSchema, type Built } from './catalog';
import { DbErrors } from './errors';
import type { QueryBody, QueryResultData } from './model';
import { buildStatement, type Statement } from './query-builder';
import { TransactionRegistry } from './transaction-registry';
import { decodeRows } from './value-codec';
import { lockTimeoutMs, mapDbError } from './pg-errors';
import { openApiPool } from './api-pool';
import { checkIdentitySupport } from './identity';

declare module '../../platform' {
  interface Services {
    database: DatabaseService;
  }
}

export class DatabaseService {
  readonly catalog: Catalog;
  readonly transactions: TransactionRegistry;

  constructor(
    private readonly p: Platform,
    /** Connection used for API statements (its own pool on external Postgres, see api-pool.ts). */
    private readonly apiDb: () => Promise<Db>,
    /** Whether statements can run as basalt_user / basalt_anon (identity.ts, checkIdentitySupport). */
    readonly identities: boolean,
  ) {
    const schema = p.settings.get<string>('database.data_schema');
    if (isPlatformSchema(schema))
      throw new Error(
        `database.data_schema: '${schema}' is a platform schema; application tables belong in their own schema (default public)`,
      );
    this.catalog = new Catalog(p.db, { schema });
    const external = p.db.kind === 'external';
    this.transactions = new TransactionRegistry({
      begin: async (setup) => (await this.apiDb()).begin({ setup }),
      idleTimeoutMs: () => p.settings.get<number>('db.transaction_idle_timeout_ms'),
      maxPerKey: () => p.settings.get<number>('db.max_transactions_per_key'),
      // Server-side backstops on external Postgres: the idle timer here is the primary
      // mechanism; idle_in_transaction_session_timeout frees the connection (and its
      // locks) even if this process died. lock_timeout < statement_timeout, so a wait
      // for another transaction's lock is its own answer (503 lock_timeout). PGlite is
      // one in-process session, so only the timer applies.
      setup: () => {
        if (!external) return [];
        const stmt = p.settings.get<number>('db.statement_timeout_ms');
        const idle = p.settings.get<number>('db.transaction_idle_timeout_ms');
        return [
          `SET LOCAL statement_timeout = ${Math.trunc(stmt)}`,
          `SET LOCAL lock_timeout = ${lockTimeoutMs(stmt)}`,
          `SET LOCAL idle_in_transaction_session_timeout = ${Math.trunc(idle) + 5000}`,
        ];
      },
      onError: (msg, cause) => p.log.warn(msg, { cause }),
    });
  }

  /** Whitelist first: a table outside it is refused before anything reveals whether it exists. */
  checkWhitelist(principal: ApiKeyPrincipal, entity: unknown): void {
    if (typeof entity !== 'string') return;
    if (!principal.tables.includes(entity)) throw DbErrors.forbidden(entity);
  }

  /** Run one request (optionally inside a transaction of this key). */
  async query(principal: ApiKeyPrincipal, body: QueryBody): Promise<QueryResultData> {
    this.checkWhitelist(principal, body.entity);
    if (body.transaction_id !== undefined) {
      return this.transactions.run(body.transaction_id, principal.id, (tx) => this.execute(body, tx, true));
    }
    return this.execute(body, await this.apiDb(), false);
  }

  /**
   * The statement of a request, built against the catalog (reloaded once when it does not
   * know the table or a column: `Catalog.build`). Without waiting on a fresh catalog.
   */
  private plan(body: QueryBody, via: Queryable | undefined): Built<Statement> | Promise<Built<Statement>> {
    const maxLimit = this.p.settings.get<number>('db.max_limit');
    return this.catalog.build(body.entity, via, (table) => buildStatement(body, table, { maxLimit }), {
      table: () => DbErrors.invalid('entity', `unknown entity '${body.entity}' (no such table in the data schema)`),
      name: (e) => DbErrors.invalid(e.path, `unknown field '${e.name}' of entity '${body.entity}'`),
    });
  }

  private async execute(body: QueryBody, q: Queryable, inTx: boolean): Promise<QueryResultData> {
    // Inside a transaction on the embedded engine the transaction holds the only
    // connection, so catalog reads must go through it.
    const via = inTx && this.p.db.kind === 'embedded' ? q : undefined;
    const planned = this.plan(body, via);
    const { value: st, snap, table } = planned instanceof Promise ? await planned : planned;
    try {
      const [res, count] = st.countSql
        ? await Promise.all([
            q.query<Record<string, unknown>>(st.sql, st.params),
            inTx ? undefined : q.query<{ total: string }>(st.countSql, st.countParams),
          ])
        : [await q.query<Record<string, unknown>>(st.sql, st.params)];
      const rows = decodeRows(st.columns, res.rows);
      const out: QueryResultData = { rows, count: rows.length };
      if (st.countSql) {
        const c = count ?? (await q.query<{ total: string }>(st.countSql, st.countParams));
        out.total = Number(c.rows[0]?.total ?? 0);
      }
      return out;
    } catch (err) {
      if (err instanceof AppError) throw err;
      // The probe runs outside the transaction; on the embedded engine that would wait for it.
      const probe = inTx && this.p.db.kind === 'embedded' ? undefined : await this.apiDb();
      throw await mapDbError(err, {
        statement: st,
        table,
        snap,
        catalog: this.catalog,
        probe,
        timeoutMs: this.p.settings.get<number>('db.statement_timeout_ms'),
      });
    }
  }

  async begin(principal: ApiKeyPrincipal): Promise<{ transaction_id: string; expires_at: string }> {
    const { id, expiresAt } = await this.transactions.begin(principal.id);
    return { transaction_id: id, expires_at: expiresAt.toISOString() };
  }

  async commit(principal: ApiKeyPrincipal, id: string): Promise<{ transaction_id: string; status: 'committed' }> {
    try {
      await this.transactions.commit(id, principal.id);
    } catch (err) {
      if (err instanceof AppError) throw err;
      // Deferred constraints are checked at commit.
      const snap = await this.catalog.get();
      throw await mapDbError(err, {
        snap,
        catalog: this.catalog,
        timeoutMs: this.p.settings.get<number>('db.statement_timeout_ms'),
      });
    }
    return { transaction_id: id, status: 'committed' };
  }

  async rollback(principal: ApiKeyPrincipal, id: string): Promise<{ transaction_id: string; status: 'rolled_back' }> {
    await this.transactions.rollback(id, principal.id);
    return { transaction_id: id, status: 'rolled_back' };
  }
}

/**
 * Create the service; the API pool opens on first use. Start-up checks that the
 * platform's role can run statements as users and anon (identity.ts); when it cannot,
 * users' own data stays off with one warning, and the Database API answers users and
 * anon exactly as it did before the feature (docs/database.md).
 */
export async function createDatabaseService(p: Platform): Promise<DatabaseService> {
  const pool = openApiPool(p);
  const support = await checkIdentitySupport(p.db);
  if (!support.ok)
    p.log.warn(
      `users' own data is off: ${support.reason}; see docs/database.md, "The platform's role on a managed server"`,
    );
  const svc = new DatabaseService(p, pool.get, support.ok);
  // A revoked key's transactions end at once, on every instance (docs/database.md, Transactions).
  p.services.keys?.onRevoke((keyId) => svc.transactions.rollbackKey(keyId));
  // Open API transactions end first, as soon as a stop begins: on the embedded engine they
  // hold the database that requests in flight and the other shutdown steps (mail jobs given
  // back, instance records) need. Whatever is still open after the drain is rolled back first.
  p.onShutdown(() => svc.transactions.close(), { drain: true });
  p.onShutdown(() => svc.transactions.rollbackAll(), { first: true });
  p.onShutdown(() => pool.close());
  return svc;
}
