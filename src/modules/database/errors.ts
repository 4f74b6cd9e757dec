/**
 * Error codes of the Database API (docs/database.md), declared once with their
 * statuses. `lock_timeout` is ours (the contract leaves it open): a wait for a lock
 * is the client's contention, not a slow query, and deserves its own answer. Messages name the offending field, operator or column and say what
 * to do; they never contain SQL text, values from the database or internals.
 */
import { AppError } from '../../http/errors';

export const DB_ERRORS = {
  RAW_SQL_DISABLED: { status: 403, code: 'raw_sql_disabled' },
  FORBIDDEN: { status: 403, code: 'forbidden' },
  VALIDATION: { status: 400, code: 'validation_error' },
  FILTERS_REQUIRED: { status: 400, code: 'filters_required' },
  CONFLICT: { status: 409, code: 'conflict' },
  QUERY_TIMEOUT: { status: 503, code: 'query_timeout' },
  LOCK_TIMEOUT: { status: 503, code: 'lock_timeout' },
  TRANSACTION_NOT_FOUND: { status: 404, code: 'transaction_not_found' },
  TRANSACTION_ABORTED: { status: 409, code: 'transaction_aborted' },
  TOO_MANY_TRANSACTIONS: { status: 429, code: 'too_many_transactions' },
} as const;

type Code = keyof typeof DB_ERRORS;

function make(which: Code, message: string, details?: Record<string, unknown>, cause?: unknown): AppError {
  const { status, code } = DB_ERRORS[which];
  return new AppError(status, code, message, { details, cause });
}

export const DbErrors = {
  rawSql: () => make('RAW_SQL_DISABLED', 'Raw SQL is disabled: the "query" field is not accepted. Use entity, action, fields, filters, data, sort, limit and offset.'),
  forbidden: (entity: string) => make('FORBIDDEN', `This API key may not access entity '${entity}'.`),
  /** 400 naming what is wrong; `field` is the request path (e.g. `filters[0].op`). */
  invalid: (field: string, message: string) => make('VALIDATION', `${field}: ${message}`, { fields: { [field]: message } }),
  column: (column: string, message: string, cause?: unknown) => make('VALIDATION', `Column '${column}': ${message}`, { column, fields: { [column]: message } }, cause),
  filtersRequired: (action: string) =>
    make('FILTERS_REQUIRED', `${action} needs at least one filter; to affect every row, filter on a condition every row meets (e.g. {"field":"id","op":"is_null","value":false}).`),
  conflict: (columns: string[], cause?: unknown) =>
    make('CONFLICT', columns.length ? `A row with the same value of ${columns.map((c) => `'${c}'`).join(', ')} already exists.` : 'A row with the same unique value already exists.', columns.length ? { columns } : undefined, cause),
  timeout: (ms: number, cause?: unknown) =>
    make('QUERY_TIMEOUT', `The query ran longer than ${ms} ms and was cancelled; narrow the filters or add an index.`, undefined, cause),
  lockTimeout: (ms: number, cause?: unknown) =>
    make('LOCK_TIMEOUT', `Waited longer than ${ms} ms for a row or table another transaction holds; nothing was changed by this query. Retry shortly.`, undefined, cause),
  txNotFound: () => make('TRANSACTION_NOT_FOUND', 'No open transaction with this id for this API key (it was committed, rolled back, timed out, or never existed).'),
  txAborted: () => make('TRANSACTION_ABORTED', 'A query in this transaction failed, so it was rolled back; nothing was committed. Begin a new transaction.'),
  tooManyTx: (max: number) => make('TOO_MANY_TRANSACTIONS', `This API key already holds ${max} open transactions; commit or roll back one first.`),
};
