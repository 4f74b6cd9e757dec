import { Elysia } from 'elysia';
import { AppError, Errors } from './errors';
import { errorResponse, pathOf, success } from './envelope';
import type { AreaFacts } from './areas';
import { requestInfo, type RequestFailure, type RequestInfo } from './request-info';
import { DatabaseBusyError, DatabaseUnavailableError, DiskFullError, WaitAbandonedError } from '../db/engine';
import type { Logger } from '../log';

/** A field problem in words a client developer can act on. */
function describeIssue(item: {
  path: string;
  message: string;
  summary?: string;
  value?: unknown;
  schema?: { format?: string };
}): string {
  if (item.value === undefined && item.path !== '') return 'is required';
  if (item.schema?.format && typeof item.value === 'string') return `must be a valid ${item.schema.format}`;
  return (item.summary ?? item.message).replace(/^Expected /, 'expected ');
}

/**
 * The field an Elysia validation issue is about, as a client names it (`filters.0.op`).
 * An empty path means the whole value Elysia checked: the body, the query… — except for
 * `type: "property"`, which Elysia reports when a single value's transform (`t.Integer`,
 * `t.Numeric` in a query or path) fails; it carries no path, so such a schema names its
 * field with `title` (extensions/media-library/routes.ts `limit`).
 */
function fieldOf(item: { path: string; schema?: { title?: unknown } }, on: string | undefined): string {
  const path = item.path.replace(/^\//, '').replace(/\//g, '.');
  if (path) return path;
  if (on === 'property') return typeof item.schema?.title === 'string' ? item.schema.title : 'parameter';
  return on === 'query' || on === 'params' || on === 'headers' || on === 'cookie' ? on : 'body';
}

/** Map anything thrown into an AppError; unknown errors become a 500 whose cause is logged. */
export function toAppError(err: unknown, area: AreaFacts): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof DiskFullError) return Errors.diskFull(err);
  if (err instanceof DatabaseBusyError) return Errors.databaseBusy(err.retryAfterSeconds);
  if (err instanceof DatabaseUnavailableError) return Errors.databaseUnavailable(err);
  type Issue = {
    path: string;
    message: string;
    summary?: string;
    value?: unknown;
    schema?: { format?: string; title?: unknown };
  };
  const e = err as { code?: unknown; name?: string; all?: Issue[]; status?: number; type?: string };
  // A response that fails its own schema is the server's bug, not the client's: 500, cause logged.
  if ((e?.name === 'ValidationError' || e?.code === 'VALIDATION') && e.type === 'response') return Errors.internal(err);
  if (e?.name === 'ValidationError' || e?.code === 'VALIDATION') {
    const fields: Record<string, string> = {};
    let all: Issue[] = [];
    try {
      all = e.all ?? [];
    } catch {}
    for (const item of all) fields[fieldOf(item, e.type)] ??= describeIssue(item);
    const first = Object.entries(fields)[0];
    const message = first ? `Invalid request: ${first[0]}: ${first[1]}` : 'Invalid request.';
    return Errors.validation(message, fields, area.validationStatus ?? 400);
  }
  if (e?.name === 'ParseError' || e?.code === 'PARSE') return Errors.invalidJson();
  if (e?.name === 'NotFoundError' || e?.code === 'NOT_FOUND') return Errors.notFound(`No route for this path.`);
  return Errors.internal(err);
}

/**
 * The log line of a 5xx answer. A failure (an unexpected throw, or an AppError carrying
 * the cause behind it, like database_unavailable) is an `error` with that cause and its
 * stack. An answer the code chose on purpose for a known state, with no cause behind it
 * (503 `mail_not_configured` until the operator sets up mail, 503 `database_busy` when no
 * connection came free in time), is a `warn` naming the code and message: nothing broke,
 * so no stack. Work whose client went away while it waited for the database never ran and
 * its answer reaches nobody: an `info` line (docs/operations.md "Logs").
 */
export function logServerError(
  log: Logger,
  appErr: AppError,
  thrown: unknown,
  fields: Record<string, unknown>,
): unknown {
  if (thrown instanceof WaitAbandonedError) {
    log.info('client went away while waiting for the database', fields);
    return undefined;
  }
  const known = thrown instanceof AppError || thrown instanceof DatabaseBusyError;
  const cause = appErr.extra.cause ?? (known ? undefined : thrown);
  if (cause === undefined)
    log.warn('request answered with an error', {
      ...fields,
      status: appErr.status,
      code: appErr.code,
      message: appErr.message,
    });
  else log.error('request failed', { ...fields, status: appErr.status, code: appErr.code, cause });
  return cause;
}

/** The most of a cause's text the request log keeps (docs/logs.md). */
const CAUSE_MAX = 4000;

/**
 * An error answer's one bookkeeping step, wherever it is rendered (the listener or the app's
 * error handler): a 5xx's log line (`logServerError`), and the error with that line's cause
 * noted on the request for the request log (docs/logs.md).
 */
export function answerError(log: Logger, info: RequestInfo, appErr: AppError, thrown: unknown, path: string): void {
  const failure: RequestFailure = { code: appErr.code, message: appErr.message };
  if (appErr.status >= 500) {
    const cause = logServerError(log, appErr, thrown, { request_id: info.id, path });
    if (cause !== undefined)
      failure.cause =
        cause instanceof Error
          ? { name: cause.name, message: cause.message.slice(0, CAUSE_MAX), stack: cause.stack?.slice(0, CAUSE_MAX) }
          : { message: String(cause).slice(0, CAUSE_MAX) };
  }
  info.failure = failure;
}

/** A success body in the envelope of the area `request` belongs to. */
export function reply(request: Request, data: unknown): unknown {
  const info = requestInfo(request);
  return success(info.area.envelope, data, info);
}

/**
 * The cross-cutting part every listener's app starts with: errors rendered in the
 * area's envelope (never a framework body, never a stack). Success bodies come from
 * `reply(request, data)` above or `successResponse` (src/http/envelope.ts).
 */
export function foundation(log: Logger) {
  return new Elysia({ name: 'basalt.foundation' }).onError({ as: 'global' }, ({ error, request, code }) => {
    const info = requestInfo(request);
    const appErr = toAppError(code === 'NOT_FOUND' ? { code } : error, info.area);
    answerError(log, info, appErr, error, pathOf(request.url));
    return errorResponse(appErr, info);
  });
}
