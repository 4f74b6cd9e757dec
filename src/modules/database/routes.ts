/**
 * HTTP of the Database API (format A envelopes). Order of checks on a query, so
 * nothing leaks to a caller who may not ask: no or invalid API key → 401 (before
 * anything about the body is answered); raw SQL field → 403; key without db:query
 * → 403; entity outside the key's whitelist → 403 (before anything reveals whether
 * it exists); then the shape of the body and the catalog check → 400.
 *
 * All but the last run in `transform`, which Elysia runs before body validation: the
 * key in the area's guard (src/http/guards.ts), the rest in the routes' own `transform`.
 */
import { rootOf, type AreaFacts } from '../../http/areas';
import { Elysia } from 'elysia';
import type { Basalt } from '../../services';
import { guardInputs } from '../../guards';
import { requirePermission } from '../../http/api-key-guard';
import { callerChecks, type DbCaller } from './caller';
import { optionalJson } from '../../http/optional-json';
import { successResponse } from '../../http/envelope';
import { DbErrors } from './errors';
import { BeginResult, EmptyBody, EndResult, QueryBody, QueryResult, TxParams } from './model';
import { errorsOf } from '../../http/envelope-schemas';

/**
 * The legacy raw SQL field: at the top level, or in any filter (groups included), sort item,
 * aggregate, `having` item or relation of `expand`. Keys of `data` are column names, not
 * request fields, so a column named "query" stays usable.
 */
function carriesRawSql(body: unknown): boolean {
  if (!isObject(body)) return false;
  if ('query' in body) return true;
  return (
    listCarriesQuery(body.filters) ||
    listCarriesQuery(body.sort) ||
    listCarriesQuery(body.having) ||
    listCarriesQuery(body.aggregates) ||
    expandCarriesQuery(body.expand, 0)
  );
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/** Deeper than the service takes (groups: 4 levels, relations: 3): refused there, not walked here. */
const WALK_DEPTH = 8;

function listCarriesQuery(x: unknown, depth = 0): boolean {
  if (!Array.isArray(x) || depth > WALK_DEPTH) return false;
  for (const i of x) if (itemCarriesQuery(i, depth)) return true;
  return false;
}

function itemCarriesQuery(i: unknown, depth: number): boolean {
  if (!isObject(i)) return false;
  if ('query' in i) return true;
  return listCarriesQuery(i.or, depth + 1) || listCarriesQuery(i.and, depth + 1) || itemCarriesQuery(i.not, depth + 1);
}

function expandCarriesQuery(x: unknown, depth: number): boolean {
  if (!isObject(x) || depth > WALK_DEPTH) return false;
  for (const name in x) {
    const r = x[name];
    if (!isObject(r)) continue;
    if ('query' in r) return true;
    if (listCarriesQuery(r.filters) || listCarriesQuery(r.sort) || expandCarriesQuery(r.expand, depth + 1)) return true;
  }
  return false;
}

const TOP_LEVEL = new Set(Object.keys(QueryBody.properties));

/**
 * Unknown keys of the body and of its sort items → 400 naming them. Checked here because body
 * validation would drop them silently (Elysia normalizes objects to their schema). Filter
 * items, groups, aggregates, `having` and `expand` reach the service as sent (their schema
 * is left to it, so a refusal names the exact position): the query builder names their
 * unknown keys.
 */
function rejectUnknownKeys(body: unknown): void {
  if (!isObject(body)) return;
  // `for…in` (a parsed body's own keys): no array of keys per object.
  for (const k in body)
    if (!TOP_LEVEL.has(k)) throw DbErrors.invalid(k, `unknown field; a query has ${[...TOP_LEVEL].join(', ')}`);
  const items = body.sort;
  if (Array.isArray(items)) {
    for (let i = 0; i < items.length; i++) {
      const item: unknown = items[i];
      if (typeof item !== 'object' || item === null) continue;
      for (const k in item)
        if (k !== 'field' && k !== 'direction')
          throw DbErrors.invalid(`sort[${i}].${k}`, 'unknown key; allowed: field, direction');
    }
  }
  rejectProtoKeys(body.data);
}

/**
 * `__proto__` as a key of `data`: JSON.parse keeps it as an ordinary key, but body
 * validation copies objects and the copy turns it into a prototype, so the column
 * would vanish without a word. No column can be named so through the API: refused,
 * naming it (checked here, before validation copies the body).
 */
function rejectProtoKeys(data: unknown): void {
  const rows = Array.isArray(data) ? data : [data];
  for (let i = 0; i < rows.length; i++) {
    const row: unknown = rows[i];
    if (typeof row === 'object' && row !== null && !Array.isArray(row) && Object.hasOwn(row, '__proto__')) {
      throw DbErrors.invalid(
        Array.isArray(data) ? `data[${i}].__proto__` : 'data.__proto__',
        'is not a column name; "__proto__" cannot be written through the API',
      );
    }
  }
}

const CALLER = Symbol('basalt.database.caller');
type Seen = Request & { [CALLER]?: DbCaller };

// A service key, a user's access token, or neither (anon: what is granted to basalt_anon).
const security: Record<string, string[]>[] = [{ ApiKey: [] }, { Bearer: [] }, {}];

export function databaseRoutes(p: Basalt, area: AreaFacts) {
  const errorResponses = errorsOf(area)(400, 401, 403, 404, 409, 429, 503);
  const svc = () => p.services.database;
  const callers = callerChecks({ ...guardInputs(p, p.services), profile: (user) => p.services.auth.me(user) });
  // The caller found in a route's `transform`, for its handler: kept on the request under a
  // module symbol (no hook hands the whole context to a function: see src/http/guards.ts; a
  // property costs less per request than a WeakMap entry).
  const callerOf = (request: Request): DbCaller => (request as Seen)[CALLER]!;
  /** Who calls (401s here, before anything about the body is answered). */
  const resolve = async (request: Request): Promise<DbCaller> => {
    const caller = await callers.resolve(request);
    (request as Seen)[CALLER] = caller;
    return caller;
  };
  /**
   * Transactions: a key with db:query, or a user while users' own data is on. Anon never
   * holds one and gets the answer it got before the feature.
   */
  const txCaller = (request: Request): DbCaller & { kind: 'key' | 'user' } => {
    const caller = callerOf(request);
    if (caller.kind === 'anon') throw new Error('unreachable: anon was refused in transform');
    return caller;
  };
  const txTransform = async (context: object) => {
    const { request } = context as { request: Request };
    const caller = await resolve(request);
    if (caller.kind === 'key') requirePermission(caller.key, 'db:query');
    else if (caller.kind === 'anon' || !svc().identities) await callers.refuseAsBefore(request);
  };
  /** Commit and rollback: the same checks, path parameter, empty body and answer. */
  const ending = {
    transform: txTransform,
    params: TxParams,
    parse: optionalJson,
    body: EmptyBody,
    response: { 200: EndResult, ...errorResponses },
  };

  return new Elysia({ name: 'basalt.database', prefix: rootOf(area) })
    .post(
      '/query',
      async ({ body, request }) => successResponse(request, await svc().query(callerOf(request), body, request.signal)),
      {
        transform: async (context) => {
          const { body, request } = context as { body: unknown; request: Request };
          const caller = await resolve(request);
          const entity = (body as { entity?: unknown } | undefined)?.entity;
          if (caller.kind === 'key') {
            // Raw SQL before the permission, so any authenticated legacy client learns why.
            if (carriesRawSql(body)) throw DbErrors.rawSql();
            requirePermission(caller.key, 'db:query');
            svc().checkWhitelist(caller.key, entity);
          } else {
            // Any active key (a public one too), and a user's token, learn why raw SQL is
            // refused; a request without either gets 401 first, as before.
            const known = caller.kind === 'user' ? svc().identities : caller.key !== null;
            if (known && carriesRawSql(body)) throw DbErrors.rawSql();
            // Users' own data: the role's grants on the entity take the whitelist's place.
            await svc().admit(caller, body, () => callers.refuseAsBefore(request));
            if (carriesRawSql(body)) throw DbErrors.rawSql();
          }
          rejectUnknownKeys(body);
        },
        body: QueryBody,
        response: { 200: QueryResult, ...errorResponses },
        detail: {
          summary: 'Run a parameterized query on a whitelisted table',
          'x-codes': {
            400: ['filters_required', 'response_too_large'],
            401: ['unauthorized', 'api_key_required', 'token_expired', 'session_revoked'],
            403: ['forbidden', 'raw_sql_disabled'],
            404: ['transaction_not_found'],
            409: ['conflict', 'transaction_aborted'],
            503: ['query_timeout', 'lock_timeout', 'shutting_down'],
          },
          description:
            'select, insert, update or delete on a table of the data schema. Needs an API key with db:query (or db:*) whose table whitelist holds the entity. ' +
            'Filters: eq neq gt gte lt lte in not_in like ilike is_null, all ANDed. Every action answers data.rows (RETURNING for writes, narrowed by fields) and data.count. ' +
            'An answer whose rows would pass db.max_response_bytes (32 MiB) → 400 response_too_large; the statement changes nothing. ' +
            'Errors: 400 validation_error / filters_required / response_too_large, 401 unauthorized / api_key_required (no key, in api_key_required mode), 403 forbidden / raw_sql_disabled, 404 transaction_not_found, 409 conflict / transaction_aborted, 503 query_timeout / lock_timeout / shutting_down (a transaction_id while the instance stops) / database_busy (no connection free within database.busy_timeout_ms; Retry-After).',
          security,
        },
      },
    )
    .post(
      '/transaction/begin',
      async ({ request }) => successResponse(request, await svc().begin(txCaller(request), request.signal)),
      {
        transform: txTransform,
        parse: optionalJson,
        body: EmptyBody,
        response: { 200: BeginResult, ...errorResponses },
        detail: {
          summary: 'Begin a transaction',
          'x-codes': {
            401: ['unauthorized', 'api_key_required', 'token_expired', 'session_revoked'],
            403: ['forbidden'],
            429: ['too_many_transactions'],
            503: ['shutting_down'],
          },
          description:
            "Opens a transaction owned by this API key, or by this signed-in user (it then runs as the user throughout). Pass transaction_id in queries; they run in arrival order and see each other's writes. " +
            'Idle longer than db.transaction_idle_timeout_ms (30 s) → rolled back and forgotten. Open longer than db.transaction_max_lifetime_ms (60 s), or idle while other work waits for the database → rolled back, and its id answers 409 transaction_aborted (details.reason lifetime / preempted). ' +
            'At most db.max_transactions_per_key (10) open or still waiting per key → 429 too_many_transactions. No connection (embedded: the one session) free within database.busy_timeout_ms (2 s) → 503 database_busy with Retry-After; a begin whose client went away never starts. While the instance stops → 503 shutting_down.',
          security,
        },
      },
    )
    .post(
      '/transaction/:id/commit',
      async ({ params, request }) => successResponse(request, await svc().commit(txCaller(request), params.id)),
      {
        ...ending,
        detail: {
          summary: 'Commit a transaction',
          'x-codes': {
            401: ['unauthorized', 'api_key_required', 'token_expired', 'session_revoked'],
            403: ['forbidden'],
            404: ['transaction_not_found'],
            409: ['transaction_aborted', 'conflict'],
            503: ['query_timeout', 'lock_timeout', 'shutting_down'],
          },
          description:
            "Commits and forgets the id. A transaction in which a query failed is rolled back instead → 409 transaction_aborted. Unknown, ended or another key's id → 404 transaction_not_found.",
          security,
        },
      },
    )
    .post(
      '/transaction/:id/rollback',
      async ({ params, request }) => successResponse(request, await svc().rollback(txCaller(request), params.id)),
      {
        ...ending,
        detail: {
          summary: 'Roll back a transaction',
          'x-codes': {
            401: ['unauthorized', 'api_key_required', 'token_expired', 'session_revoked'],
            403: ['forbidden'],
            404: ['transaction_not_found'],
            503: ['shutting_down'],
          },
          description:
            "Discards the transaction's changes and forgets the id. Unknown, ended or another key's id → 404 transaction_not_found.",
          security,
        },
      },
    );
}
