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

/** Factories with default messages, for codes shared by every area. */
export const Errors = {
  badRequest: (message: string, details?: Record<string, unknown>) => new AppError(400, 'validation_error', message, { details }),
  validation: (message: string, fields?: Record<string, string>, status = 400) =>
    new AppError(status, 'validation_error', message, { details: fields ? { fields } : undefined }),
  invalidJson: () => new AppError(400, 'invalid_json', 'The request body is not valid JSON.'),
  /** A JSON body past web.max_json_depth / web.max_json_items (src/http/json-bounds.ts). */
  jsonTooComplex: (p: { kind: 'depth' | 'items'; limit: number }) =>
    new AppError(
      400,
      'invalid_json',
      p.kind === 'depth'
        ? `The request body nests arrays and objects deeper than ${p.limit} levels (setting web.max_json_depth).`
        : `The request body has an array or object with more than ${p.limit} elements (setting web.max_json_items).`,
      { details: { limit: p.kind === 'depth' ? 'web.max_json_depth' : 'web.max_json_items', max: p.limit } },
    ),
  unauthorized: (message = 'Missing or invalid credentials.') => new AppError(401, 'unauthorized', message),
  forbidden: (message = 'Not allowed.') => new AppError(403, 'forbidden', message),
  notFound: (message = 'Not found.') => new AppError(404, 'not_found', message),
  methodNotAllowed: () => new AppError(405, 'method_not_allowed', 'Method not allowed on this path.'),
  payloadTooLarge: (limit: number) => new AppError(413, 'payload_too_large', `The request body is larger than ${limit} bytes.`),
  unsupportedMediaType: (expected = 'application/json') =>
    new AppError(415, 'unsupported_media_type', `Content-Type must be ${expected}.`),
  rateLimited: (retryAfter: number, message = 'Too many requests; try again later.') =>
    new AppError(429, 'rate_limited', message, { retryAfter, headers: { 'Retry-After': String(retryAfter) } }),
  databaseUnavailable: (cause?: unknown) =>
    new AppError(503, 'database_unavailable', 'The database is unavailable; retry shortly.', { cause }),
  internal: (cause?: unknown) => new AppError(500, 'internal_error', 'Internal error; the request id identifies it in the server log.', { cause }),
};
