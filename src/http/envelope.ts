/**
 * The three response envelopes (README.md, What it serves); each area's is named in its
 * entry of the route list (src/app.ts).
 *  A — auth, database, runtime config, admin, system: {success, data} / {success:false, error:{code,message,…}}
 *  B — mail and extension helpers: {success, data, meta:{trace_id, execution_ms}, errors:[…]}
 *  C — files: {success:true, ...payload} / {success:false, error:"message"}
 */
import type { AppError } from './errors';
import { requestInfo, type RequestInfo } from './request-info';
import { jsonAnswer } from './security-headers';
import type {
  ErrorBodyA,
  ErrorBodyB,
  ErrorBodyC,
  Format,
  MetaBody,
  SuccessBodyA,
  SuccessBodyB,
  SuccessBodyC,
} from './envelope-schemas';

export type { Format } from './envelope-schemas';

/**
 * The path of a request URL, without query or fragment. Bun hands the listener an
 * absolute URL `http://<host>/<path>` whose path is already normalized (dot segments
 * resolved), so no URL object is needed; this is the same path Elysia's router matches
 * (the apps index from the scheme, `handler.standardHostname: false` in src/app.ts).
 * When Bun cannot make sense of the Host header it hands the bare request target
 * `/<path>` instead; the listener refuses those (`hostProblem`), in this path's area.
 */
export function pathOf(url: string): string {
  const slash = url.charCodeAt(0) === 47 /* / */ ? 0 : url.indexOf('/', url.indexOf('//') + 2);
  if (slash === -1) return '/';
  let end = url.length;
  const q = url.indexOf('?', slash);
  if (q !== -1) end = q;
  const h = url.indexOf('#', slash);
  if (h !== -1 && h < end) end = h;
  return url.slice(slash, end);
}

/** A host name (letters, digits, `-`, `_`, dot-separated labels) or an IPv6 literal, with an optional port 1–65535. */
const AUTHORITY = /^(?:(?:[a-z0-9_-]+\.)*[a-z0-9_-]+\.?|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/i;
/** The last authority found valid: nearly every request repeats it, and comparing in place allocates nothing. */
let knownAuthority = 'http://localhost/';

/**
 * True when the request URL is not `http://<valid host[:port]>/…`: an empty, garbled
 * or unparseable Host header (Bun then hands a bare `/<path>`), a port out of range.
 * The listener answers those 400 before routing, so Elysia's router and `pathOf`
 * always see the same path. The listener is plain HTTP (TLS ends at a proxy).
 */
export function hostProblem(url: string): boolean {
  if (url.startsWith(knownAuthority)) return false;
  if (!url.startsWith('http://')) return true;
  const slash = url.indexOf('/', 7);
  if (slash === -1) return true;
  const m = AUTHORITY.exec(url.slice(7, slash));
  if (!m || (m[1] !== undefined && (Number(m[1]) < 1 || Number(m[1]) > 65535))) return true;
  knownAuthority = url.slice(0, slash + 1);
  return false;
}

export interface RequestMeta {
  id: string;
  start: number;
}

type SuccessBody = SuccessBodyA<unknown> | SuccessBodyB<unknown> | SuccessBodyC<object>;

/** A success body in `format` (the schemas: src/http/envelope-schemas.ts), typed for the format when it is known. */
export function success<T>(format: 'A', data: T, meta?: RequestMeta): SuccessBodyA<T>;
export function success<T>(format: 'B', data: T, meta: RequestMeta): SuccessBodyB<T>;
export function success<T extends object>(format: 'C', data: T, meta?: RequestMeta): SuccessBodyC<T>;
export function success(format: Format, data: unknown, meta: RequestMeta): SuccessBody;
export function success(format: Format, data: unknown, meta?: RequestMeta): SuccessBody {
  if (format === 'B') return { success: true, data, meta: metaOf(meta!), errors: [] };
  if (format === 'C') return { success: true, ...(data as object) };
  return { success: true, data };
}

export function errorBody(format: Format, err: AppError, meta: RequestMeta): ErrorBodyA | ErrorBodyB | ErrorBodyC {
  if (format === 'B') {
    return {
      success: false,
      data: {},
      meta: metaOf(meta),
      errors: [
        {
          code: err.code,
          message: err.message,
          details: {
            ...(err.extra.details ?? {}),
            ...(err.extra.retryAfter !== undefined ? { retry_after: err.extra.retryAfter } : {}),
          },
        },
      ],
    };
  }
  if (format === 'C') return { success: false, error: err.message, code: err.code };
  const error: ErrorBodyA['error'] = { code: err.code, message: err.message };
  if (err.extra.retryAfter !== undefined) error.retry_after = err.extra.retryAfter;
  if (err.extra.details) error.details = err.extra.details;
  return { success: false, error };
}

function metaOf(meta: RequestMeta): MetaBody {
  return { trace_id: meta.id, execution_ms: Math.round((performance.now() - meta.start) * 100) / 100 };
}

/**
 * The success body of `request`'s area (its envelope: src/app.ts), already serialized,
 * with the area's security headers and the request id (src/http/security-headers.ts).
 * Routes on the hot paths (Database API, Public Auth, Mail) answer this way: Elysia does
 * not check a Response against the route's `response` schema, which still describes the
 * body in the OpenAPI document and is checked against live answers by
 * test/openapi/conformance.test.ts. Checking and cleaning our own output on every request
 * cost about a third of the Database API's route (docs/database.md, Figures).
 */
export function successResponse(
  request: Request,
  data: unknown,
  init?: { status?: number; headers?: Record<string, string> },
): Response {
  const info = requestInfo(request);
  return jsonAnswer(JSON.stringify(success(info.area.envelope, data, info)), init?.status ?? 200, info, init?.headers);
}

/** `err` in the envelope of the request's area, with the area's security headers and the request id. */
export function errorResponse(err: AppError, info: RequestInfo): Response {
  return jsonAnswer(JSON.stringify(errorBody(info.area.envelope, err, info)), err.status, info, err.extra.headers);
}
