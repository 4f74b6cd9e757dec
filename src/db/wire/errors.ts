/**
 * PostgreSQL's ErrorResponse, read the same way for both engines' wire paths
 * (src/db/embedded-wire.ts, src/db/wire/connection.ts): one map of its fields.
 */
import { DatabaseUnavailableError, normalizeDbError } from '../engine';

/**
 * An ErrorResponse, with PostgreSQL's fields under the names PGlite and node-postgres give them
 * (normalizeDbError in src/db/engine.ts reads `code`, `detail`, `column`, `constraint`, `table`
 * and `schema`; the embedded engine reads `severity` to stop on a PANIC or FATAL).
 */
export class PostgresError extends Error {
  override name = 'PostgresError';
  severity?: string;
  code?: string;
  detail?: string;
  hint?: string;
  position?: string;
  internalPosition?: string;
  internalQuery?: string;
  where?: string;
  schema?: string;
  table?: string;
  column?: string;
  dataType?: string;
  constraint?: string;
  file?: string;
  line?: string;
  routine?: string;
}

type Field = Exclude<keyof PostgresError, 'name' | 'message' | 'stack' | 'cause'>;

/**
 * ErrorResponse fields by their one-letter code (PostgreSQL's protocol docs, "Error and Notice
 * Message Fields"); M is the message. V, the severity never localized, follows S in a message
 * and so wins over it where the server sends both.
 */
const ERROR_FIELDS: Record<string, Field> = {
  S: 'severity',
  V: 'severity',
  C: 'code',
  D: 'detail',
  H: 'hint',
  P: 'position',
  p: 'internalPosition',
  q: 'internalQuery',
  W: 'where',
  s: 'schema',
  t: 'table',
  c: 'column',
  d: 'dataType',
  n: 'constraint',
  F: 'file',
  L: 'line',
  R: 'routine',
};

/** The ErrorResponse whose body is `b[start, end)` (after the message's code and length). */
export function readErrorResponse(b: Buffer, start = 0, end = b.length): PostgresError {
  const err = new PostgresError('database error');
  let p = start;
  while (p < end && b[p] !== 0) {
    const z = b.indexOf(0, p + 1);
    const letter = String.fromCharCode(b[p]!);
    const value = b.toString('utf8', p + 1, z);
    if (letter === 'M') err.message = value;
    else {
      const name = ERROR_FIELDS[letter];
      if (name) err[name] = value;
    }
    p = z + 1;
  }
  return err;
}

/** A connection failure, with a code normalizeDbError maps to "database unavailable". */
export function connectionError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * An error of the connect, TLS handshake or authentication as one normalizeDbError maps to
 * "database unavailable": the server refusing the connection (a wrong password, no pg_hba.conf
 * entry such as a non-TLS connection to a hostssl-only server, a database that is not there, too
 * many connections) is SQLSTATE 08004 with the server's message (no password in it), any other
 * failure (a TLS error, a SCRAM exchange that does not check out) 08001. UNSUPPORTED_AUTH stays:
 * the caller then keeps postgres.js (src/db/external.ts).
 */
export function normalizeConnectError(e: unknown): unknown {
  const code = (e as { code?: unknown })?.code;
  if (code === 'UNSUPPORTED_AUTH' || normalizeDbError(e) instanceof DatabaseUnavailableError) return e;
  const message = (e as Error)?.message ?? String(e);
  if (e instanceof PostgresError)
    return connectionError('08004', `the database refused the connection: ${message} (${String(code)})`);
  return connectionError(
    '08001',
    `could not connect to the database (${typeof code === 'string' ? `${code}: ` : ''}${message})`,
  );
}
