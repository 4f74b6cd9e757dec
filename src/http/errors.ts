/**
 * The one error type of the HTTP layer: a status, a stable code and a message
 * safe to show. The cause is kept for the log and never reaches a client.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: {
      details?: Record<string, unknown>;
      retryAfter?: number;
      headers?: Record<string, string>;
      cause?: unknown;
    } = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

type Extra = AppError['extra'];

/**
 * One error code of an area: its status, its code and its default message. The
 * message is a string (the factory then takes an optional message in its place) or a
 * function of the factory's arguments; `extra` adds facts beside it: `details`,
 * `retryAfter` (also sent as `Retry-After`: 429, 503 `database_busy`), `headers`, the `cause` (logged only).
 */
export interface ErrorSpec {
  status: number;
  code: string;
  message: string | ((...args: never[]) => string);
  extra?: Extra | ((...args: never[]) => Extra);
}

type Params<F> = F extends (...args: infer A) => unknown ? A : never;
/**
 * A factory's arguments: those of `message` or `extra`, whichever is a function and takes
 * more (both receive them all); with neither a function, an optional message.
 */
type ArgsOf<S extends ErrorSpec> = S['message'] extends (...args: never[]) => string
  ? S['extra'] extends (...args: never[]) => Extra
    ? Required<Params<S['extra']>> extends [...Required<Params<S['message']>>, unknown, ...unknown[]]
      ? Params<S['extra']>
      : Params<S['message']>
    : Params<S['message']>
  : S['extra'] extends (...args: never[]) => Extra
    ? Params<S['extra']>
    : [message?: string];

/** An error's factory; `is(e)` tells whether `e` is that error, so callers test its type, not its code string. */
export type ErrorFactory<Args extends unknown[]> = ((...args: Args) => AppError) & {
  readonly is: (e: unknown) => e is AppError;
};

export type ErrorFactories<S extends Record<string, ErrorSpec>> = {
  readonly [K in keyof S]: ErrorFactory<ArgsOf<S[K]>>;
};

/**
 * Declare an area's error codes, each once: `{ name: { status, code, message } }` →
 * `{ name(...) → AppError }`. Every area's errors.ts is one call of it (docs/extensions.md
 * lists the shared ones extensions get as `ctx.errors`).
 *
 * @example
 * export const ShopErrors = defineErrors({
 *   outOfStock: { status: 409, code: 'out_of_stock', message: (sku: string) => `'${sku}' is out of stock.` },
 *   closed: { status: 503, code: 'shop_closed', message: 'The shop is closed.' },
 * });
 * throw ShopErrors.outOfStock('tea-01');
 */
export function defineErrors<const S extends Record<string, ErrorSpec>>(specs: S): ErrorFactories<S> {
  const factories: Record<string, ErrorFactory<unknown[]>> = {};
  for (const [name, spec] of Object.entries(specs)) {
    // The arguments were checked against the spec's own functions by ErrorFactories' types.
    const messageOf = spec.message as string | ((...args: unknown[]) => string);
    const extraOf = spec.extra as Extra | ((...args: unknown[]) => Extra) | undefined;
    const make = (...args: unknown[]) => {
      const message =
        typeof messageOf === 'function'
          ? messageOf(...args)
          : typeof extraOf === 'function'
            ? messageOf
            : ((args[0] as string | undefined) ?? messageOf);
      const extra = typeof extraOf === 'function' ? extraOf(...args) : extraOf;
      return new AppError(spec.status, spec.code, message, withRetryHeader(extra));
    };
    factories[name] = Object.assign(make, {
      is: (e: unknown): e is AppError => e instanceof AppError && e.code === spec.code && e.status === spec.status,
    });
  }
  return factories as ErrorFactories<S>;
}

/** A wait in seconds is also the `Retry-After` header. */
function withRetryHeader(extra: Extra | undefined): Extra {
  if (!extra) return {};
  if (extra.retryAfter === undefined || extra.headers?.['Retry-After'] !== undefined) return extra;
  return { ...extra, headers: { ...extra.headers, 'Retry-After': String(extra.retryAfter) } };
}

/** Options of a `validation_error` beyond its fields. A number is the status (the older form). */
export type ValidationOptions = number | { status?: number; details?: Record<string, unknown>; cause?: unknown };

/**
 * The one `validation_error`: 400 (422 on Public Auth, docs/auth.md), and `details.fields`
 * naming each field with its problem, `{ fields: { <field>: <problem> } }`, in every
 * area and envelope. An area may add facts beside `fields` (the Database API's
 * `column`, docs/database.md; the Mail API's `missing_variables`, docs/mail.md).
 * Without `fields` and facts there are no details.
 */
export function validationError(
  message: string,
  fields?: Record<string, string>,
  opts: ValidationOptions = {},
): AppError {
  const o = typeof opts === 'number' ? { status: opts } : opts;
  const details = fields ? { ...o.details, fields } : o.details;
  return new AppError(
    o.status ?? 400,
    'validation_error',
    message,
    o.cause === undefined ? { details } : { details, cause: o.cause },
  );
}

/** The message of a `validation_error` about one field: `Invalid request: <field>: <problem>`. */
export function fieldProblem(field: string, problem: string, status?: number): AppError {
  return validationError(`Invalid request: ${field}: ${problem}`, { [field]: problem }, status);
}

/** Codes shared by every area, with their default messages (extensions get them as `ctx.errors`, docs/extensions.md). */
export const Errors = {
  ...defineErrors({
    invalidJson: { status: 400, code: 'invalid_json', message: 'The request body is not valid JSON.' },
    /** A JSON body past web.max_json_depth / web.max_json_items (src/http/json-bounds.ts). */
    jsonTooComplex: {
      status: 400,
      code: 'invalid_json',
      message: (p: { kind: 'depth' | 'items'; limit: number }) =>
        p.kind === 'depth'
          ? `The request body nests arrays and objects deeper than ${p.limit} levels (setting web.max_json_depth).`
          : `The request body has an array or object with more than ${p.limit} elements (setting web.max_json_items).`,
      extra: (p: { kind: 'depth' | 'items'; limit: number }) => ({
        details: { limit: p.kind === 'depth' ? 'web.max_json_depth' : 'web.max_json_items', max: p.limit },
      }),
    },
    /** The Host header is missing or malformed: answered before routing (src/http/server.ts). */
    invalidHost: { status: 400, code: 'invalid_host', message: 'The Host header is missing or malformed.' },
    unauthorized: { status: 401, code: 'unauthorized', message: 'Missing or invalid credentials.' },
    /** web.public_api_access_mode=api_key_required and no X-API-Key (docs/api-keys.md). */
    apiKeyRequired: {
      status: 401,
      code: 'api_key_required',
      message: 'This API requires an API key in the X-API-Key header.',
    },
    forbidden: { status: 403, code: 'forbidden', message: 'Not allowed.' },
    /** web.metrics_access=loopback and the client is not on this machine (docs/operations.md). */
    metricsLoopbackOnly: {
      status: 403,
      code: 'forbidden',
      message: '/metrics is served to clients on this machine only (web.metrics_access).',
    },
    notFound: { status: 404, code: 'not_found', message: 'Not found.' },
    methodNotAllowed: { status: 405, code: 'method_not_allowed', message: 'Method not allowed on this path.' },
    payloadTooLarge: {
      status: 413,
      code: 'payload_too_large',
      message: (limit: number) => `The request body is larger than ${limit} bytes.`,
    },
    unsupportedMediaType: {
      status: 415,
      code: 'unsupported_media_type',
      message: (expected: string = 'application/json') => `Content-Type must be ${expected}.`,
    },
    rateLimited: {
      status: 429,
      code: 'rate_limited',
      message: (_retryAfter: number, message: string = 'Too many requests; try again later.') => message,
      extra: (retryAfter: number) => ({ retryAfter }),
    },
    internal: {
      status: 500,
      code: 'internal_error',
      message: 'Internal error; the request id identifies it in the server log.',
      extra: (cause?: unknown) => ({ cause }),
    },
    databaseUnavailable: {
      status: 503,
      code: 'database_unavailable',
      message: 'The database is unavailable; retry shortly.',
      extra: (cause?: unknown) => ({ cause }),
    },
    /**
     * No connection (embedded: the one session) became free within database.busy_timeout_ms
     * (src/db/wait-gate.ts): every area that waits for the database answers it.
     */
    databaseBusy: {
      status: 503,
      code: 'database_busy',
      message: 'The database is busy with other work; retry after the number of seconds in Retry-After.',
      extra: (retryAfter: number) => ({ retryAfter }),
    },
    /**
     * A new process is taking this one over (src/handover.ts) and was not serving within
     * web.takeover_wait_ms: the request waited that long and is refused, never run.
     */
    restarting: {
      status: 503,
      code: 'restarting',
      message: 'The server is being replaced by a new version; retry after the number of seconds in Retry-After.',
      extra: (retryAfter: number) => ({ retryAfter }),
    },
    /** The disk holding the database is full (src/db/engine.ts DiskFullError); reads may still work. */
    diskFull: {
      status: 503,
      code: 'disk_full',
      message: 'The server has no disk space left to store this; the operator must free some.',
      extra: (cause?: unknown) => ({ cause, retryAfter: 60 }),
    },
  }),
  /** 400 (or `opts.status`) `validation_error` with `details.fields` (`validationError`). */
  validation: validationError,
  /**
   * 400 `validation_error`, for extensions (docs/extensions.md): `details` as given, none
   * when omitted. New code names the field with `validation(message, { field: problem })`.
   */
  badRequest: (message: string, details?: Record<string, unknown>) => validationError(message, undefined, { details }),
};
