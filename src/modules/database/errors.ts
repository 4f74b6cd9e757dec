/**
 * Error codes of the Database API (docs/database.md), declared once with their
 * statuses. `lock_timeout` is ours: a wait for a lock is the client's contention, not
 * a slow query, and deserves its own answer. Messages name the offending field,
 * operator or column and say what to do; they never contain SQL text, values from the
 * database or internals.
 */
import { defineErrors, validationError } from '../../http/errors';
import { MAX_BIND_PARAMS } from '../../db/wire-writer';

export const DbErrors = {
  ...defineErrors({
    rawSql: {
      status: 403,
      code: 'raw_sql_disabled',
      message:
        'Raw SQL is disabled: the "query" field is not accepted. Use entity, action, fields, filters, data, sort, limit and offset.',
    },
    forbidden: {
      status: 403,
      code: 'forbidden',
      message: (entity: string) => `This API key may not access entity '${entity}'.`,
    },
    /**
     * Users' own data: the entity is not granted to the caller's role (or does not exist:
     * the two answer alike, so grants never reveal which tables exist).
     */
    notGranted: {
      status: 403,
      code: 'forbidden',
      message: (entity: string, role: string) =>
        `You may not access entity '${entity}': ${role} holds no privilege on it for this. Grant it in a migration (docs/database.md, "Who is which role").`,
      extra: (_entity: string, role: string) => ({ details: { role } }),
    },
    /** Users' own data: a column named in fields, filters, sort or data is not granted for that use. */
    columnNotGranted: {
      status: 403,
      code: 'forbidden',
      message: (entity: string, column: string, use: string) =>
        `You may not ${use} column '${column}' of entity '${entity}'.`,
      extra: (_entity: string, column: string) => ({ details: { column } }),
    },
    /** Users' own data: a row-level security policy refuses the row written (WITH CHECK), or the role lost a grant. */
    policyRefused: {
      status: 403,
      code: 'forbidden',
      message: (entity: string) =>
        `The row-level rules of entity '${entity}' refuse this write (or a privilege it needs is not granted).`,
      extra: (entity: string, cause?: unknown) => ({ details: { entity }, cause }),
    },
    /** The database itself refuses the platform role (42501). */
    roleForbidden: {
      status: 403,
      code: 'forbidden',
      message: 'The database refuses this action on this entity to the platform role; ask the operator to grant it.',
      extra: (cause?: unknown) => ({ cause }),
    },
    filtersRequired: {
      status: 400,
      code: 'filters_required',
      message: (action: string) =>
        `${action} needs at least one filter; to affect every row, filter on a condition every row meets (e.g. {"field":"id","op":"is_null","value":false}).`,
    },
    conflict: {
      status: 409,
      code: 'conflict',
      message: (columns: string[]) =>
        columns.length
          ? `A row with the same value of ${columns.map((c) => `'${c}'`).join(', ')} already exists.`
          : 'A row with the same unique value already exists.',
      extra: (columns: string[], cause?: unknown) => ({ details: columns.length ? { columns } : undefined, cause }),
    },
    /** A serialization failure or deadlock (40001, 40P01): the statement may simply be retried. */
    collided: {
      status: 409,
      code: 'conflict',
      message: 'The statement collided with a concurrent transaction; retry it.',
      extra: (cause?: unknown) => ({ cause }),
    },
    timeout: {
      status: 503,
      code: 'query_timeout',
      message: (ms: number) =>
        `The query ran longer than ${ms} ms and was cancelled; narrow the filters or add an index.`,
      extra: (_ms: number, cause?: unknown) => ({ cause }),
    },
    lockTimeout: {
      status: 503,
      code: 'lock_timeout',
      message: (ms: number) =>
        `Waited longer than ${ms} ms for a row or table another transaction holds; nothing was changed by this query. Retry shortly.`,
      extra: (_ms: number, cause?: unknown) => ({ cause }),
    },
    /** The rows would pass db.max_response_bytes (a select's reader, a write's `boundAnswer`): nothing changed. */
    responseTooLarge: {
      status: 400,
      code: 'response_too_large',
      message: (max: number) =>
        `The answer would be larger than ${max} bytes (setting db.max_response_bytes), so the statement was stopped and changed nothing (inside a transaction, the transaction is rolled back). Ask for fewer rows (a lower limit, paging with offset) or fewer fields.`,
      extra: (max: number, cause?: unknown) => ({
        details: { setting: 'db.max_response_bytes', max_bytes: max },
        cause,
      }),
    },
    txNotFound: {
      status: 404,
      code: 'transaction_not_found',
      message:
        'No open transaction with this id for this API key or user (it was committed, rolled back, timed out, or never existed).',
    },
    txAborted: {
      status: 409,
      code: 'transaction_aborted',
      message:
        'A query in this transaction failed, so it was rolled back; nothing was committed. Begin a new transaction.',
    },
    /** Idle while other work waited for the database: rolled back (docs/database.md, "Waiting for the database"). */
    txPreempted: {
      status: 409,
      code: 'transaction_aborted',
      message:
        'This transaction was rolled back because it sat idle while other work waited for the database; nothing was committed. Begin a new transaction and send its requests without pauses.',
      extra: { details: { reason: 'preempted' } },
    },
    /** Open past db.transaction_max_lifetime_ms: rolled back. */
    txOutlived: {
      status: 409,
      code: 'transaction_aborted',
      message: (ms: number) =>
        `This transaction was rolled back because it stayed open longer than ${ms} ms (db.transaction_max_lifetime_ms); nothing was committed. Begin a new one for a shorter unit of work.`,
      extra: () => ({ details: { reason: 'lifetime' } }),
    },
    /** A begin while the instance stops (docs/database.md, Transactions). */
    shuttingDown: {
      status: 503,
      code: 'shutting_down',
      message:
        'This instance is shutting down and opens no new transaction; retry, another instance or this one once restarted will answer.',
    },
    tooManyTx: {
      status: 429,
      code: 'too_many_transactions',
      message: (max: number) =>
        `This API key or user already holds ${max} open transactions; commit or roll back one first.`,
    },
  }),
  /** 400 `validation_error` naming what is wrong; `field` is the request path (e.g. `filters[0].op`). */
  invalid: (field: string, message: string) => validationError(`${field}: ${message}`, { [field]: message }),
  /**
   * 400 `validation_error`: the statement would need more values than PostgreSQL binds in one
   * statement (MAX_BIND_PARAMS, src/db/wire-writer.ts; docs/database.md, "Limits").
   */
  tooManyValues: (field: 'data' | 'filters') =>
    DbErrors.invalid(
      field,
      `too many values for one statement: PostgreSQL takes at most ${MAX_BIND_PARAMS.toLocaleString('en')} (every value of every row and filter counts); send fewer rows or values per request, in several requests`,
    ),
  /**
   * 400 `validation_error` about a column's value: `details.column` beside `details.fields`.
   * `at`, the value's place in the request (`data.total`), is in the message and in
   * `details.at`; the field's own message says only what is wrong with the value (the
   * panel shows it under the column's input).
   */
  column: (column: string, message: string, cause?: unknown, at?: string) =>
    validationError(
      `Column '${column}': ${message}${at ? ` (at ${at})` : ''}`,
      { [column]: message },
      {
        details: at ? { column, at } : { column },
        cause,
      },
    ),
};
