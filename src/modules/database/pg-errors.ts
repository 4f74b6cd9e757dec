/**
 * Postgres errors of API statements → Database API errors (docs/database.md). The
 * client learns which column and what to do; never the SQL text, the server's
 * message (it quotes values and internals) or constraint internals.
 */
import { AnswerTooLargeError, DatabaseUnavailableError, PgError, type Queryable } from '../../db/engine';
import { AppError, Errors } from '../../http/errors';
import type { Catalog, CatalogSnapshot, Column, Table } from './catalog';
import { DbErrors } from './errors';
import type { Statement } from './query-builder';
import { answerLimitOf } from './value-codec';

export interface ErrorContext {
  statement?: Statement;
  table?: Table;
  snap: CatalogSnapshot;
  catalog: Catalog;
  /** A connection outside the failed statement's transaction, to find the bad value. */
  probe?: Queryable;
  timeoutMs: number;
}

/**
 * lock_timeout of Database API statements: half the statement timeout, so a wait for
 * a lock another transaction holds ends as 503 lock_timeout before the statement
 * timeout could fire, and a statement that waited still has time left to run.
 */
export function lockTimeoutMs(statementTimeoutMs: number): number {
  return Math.max(50, Math.trunc(statementTimeoutMs / 2));
}

/** Columns named by `Key (a, b)=(…)` in a constraint error detail, kept only if the table has them. */
function keyColumns(detail: string | undefined, table: Table | undefined): string[] {
  const m = detail ? /^Key \((.+?)\)=/.exec(detail) : null;
  if (!m) return [];
  return m[1]!
    .split(',')
    .map((s) => s.trim().replace(/^"|"$/g, ''))
    .filter((c) => !table || table.columns.has(c));
}

function constraintColumns(e: PgError, ctx: ErrorContext): string[] {
  const byName = e.detail.constraint ? ctx.snap.constraints.get(e.detail.constraint) : undefined;
  return byName ?? keyColumns(e.detail.detail, ctx.table);
}

const DATA_MESSAGES: Record<string, string> = {
  '22001': 'value is too long for the column',
  '22003': 'value is out of range for the column type',
  '22007': 'is not a valid date/time',
  '22008': 'date/time value is out of range',
  '22P02': 'value is not valid for the column type',
  '22023': 'value is not valid for the column type',
  '22021': 'value contains bytes that are not valid text',
  '22P05': 'value contains characters that cannot be stored',
};

/**
 * A data exception does not say which value failed. Find it by casting each bound
 * value alone to its column's type (only on this error path).
 */
async function findBadColumn(ctx: ErrorContext): Promise<Column | undefined> {
  const st = ctx.statement;
  if (!st || !ctx.probe) return undefined;
  for (let i = 0; i < st.params.length; i++) {
    const col = st.paramColumns[i];
    if (!col || st.params[i] === null) continue;
    try {
      await ctx.probe.query(`SELECT $1::text::${st.paramIsList[i] ? col.castType + '[]' : col.fullType} AS v`, [
        st.params[i],
      ]);
    } catch (e) {
      if (e instanceof PgError && e.code.startsWith('22')) return col;
      if (e instanceof DatabaseUnavailableError) return undefined;
    }
  }
  return undefined;
}

/** The request path of the like/ilike pattern Postgres refused: one ending in an odd run of backslashes, else the first. */
function badPattern(st: Statement | undefined): string | undefined {
  if (!st?.patterns.length) return undefined;
  const lone = st.patterns.find(({ param }) => {
    const v = String(st.params[param] ?? '');
    let n = 0;
    while (n < v.length && v.charCodeAt(v.length - 1 - n) === 92 /* \\ */) n++;
    return n % 2 === 1;
  });
  return (lone ?? st.patterns[0]!).path;
}

export async function mapDbError(err: unknown, ctx: ErrorContext): Promise<unknown> {
  if (err instanceof AnswerTooLargeError) return DbErrors.responseTooLarge(err.limit, err);
  if (err instanceof AppError || !(err instanceof PgError)) return err;
  const code = err.code;
  const maxBytes = answerLimitOf(err);
  if (maxBytes !== undefined) return DbErrors.responseTooLarge(maxBytes, err);
  switch (code) {
    case '23505':
      return DbErrors.conflict(constraintColumns(err, ctx), err);
    case '23503': {
      const still = /update or delete on table/.test(err.message);
      if (still) {
        // The constraint belongs to the referencing table, whose columns (and name) this
        // key may not know: name the referenced key columns of the entity instead.
        const cols = keyColumns(err.detail.detail, ctx.table);
        const what = 'the row is still referenced by rows of another table; remove or change those first';
        return cols.length
          ? DbErrors.column(cols.join(', '), what, err)
          : DbErrors.invalid('filters', `a matching row ${what.slice(8)}`);
      }
      const cols = constraintColumns(err, ctx);
      const what = 'refers to a row that does not exist';
      return cols.length ? DbErrors.column(cols.join(', '), what, err) : DbErrors.invalid('data', what);
    }
    case '23502': {
      const col = err.detail.column;
      return col
        ? DbErrors.column(col, 'must not be null (the column has no default); give it a value', err)
        : DbErrors.invalid('data', 'a required column is missing');
    }
    case '23514': {
      const cols = constraintColumns(err, ctx);
      return cols.length
        ? DbErrors.column(cols.join(', '), 'value breaks a check rule of the table', err)
        : DbErrors.invalid('data', 'a value breaks a check rule of the table');
    }
    case '428C9': {
      const m = /column "([^"]+)"/.exec(err.message);
      const col = m?.[1] && ctx.table?.columns.has(m[1]) ? m[1] : undefined;
      return col
        ? DbErrors.column(col, 'is generated by the database and cannot be set', err)
        : DbErrors.invalid('data', 'a generated column cannot be set');
    }
    case '57014':
      return DbErrors.timeout(ctx.timeoutMs, err);
    case '55P03':
      return DbErrors.lockTimeout(lockTimeoutMs(ctx.timeoutMs), err);
    case '40001':
    case '40P01':
      return DbErrors.collided(err);
    case '42703':
    case '42P01':
      // The schema changed under the cached catalog.
      ctx.catalog.invalidate();
      return DbErrors.invalid('entity', 'the table or one of its columns no longer exists; check the schema and retry');
    case '42883':
      return DbErrors.invalid('filters', 'an operator is not available for the type of its column');
    case '23P01':
      return DbErrors.conflict(constraintColumns(err, ctx), err);
    case '0A000':
    case '55000':
      // e.g. writing to a view that is not updatable.
      return DbErrors.invalid('action', 'this entity does not accept this action (a view that is not updatable?)');
    case '42501':
      return DbErrors.roleForbidden(err);
  }
  if (code.startsWith('54'))
    return DbErrors.invalid('data', 'the request is too large or complex for the database; split it');
  // 22025 invalid escape sequence, 22019 invalid escape character: a like/ilike pattern.
  if (code === '22025' || code === '22019') {
    const pattern = badPattern(ctx.statement);
    if (pattern)
      return DbErrors.invalid(
        pattern,
        'the pattern ends with a lone backslash, which escapes the next character; write \\\\ for a literal backslash',
      );
  }
  if (code.startsWith('22')) {
    const col = await findBadColumn(ctx);
    const msg = DATA_MESSAGES[code] ?? 'value is not valid for the column type';
    return col ? DbErrors.column(col.name, `${msg} (${col.fullType})`, err) : DbErrors.invalid('data', `a ${msg}`);
  }
  return Errors.internal(err);
}
