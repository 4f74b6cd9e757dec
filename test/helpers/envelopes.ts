/**
 * One assertion per response envelope (src/http/envelope-schemas.ts, README.md "What it
 * serves"): each checks the status and the whole body, so no key is missing, none is
 * extra, and the error fields have their types.
 *  A — `{success:true, data}` / `{success:false, error:{code, message, retry_after?, details?}}`
 *  B — `{success, data, meta:{trace_id, execution_ms}, errors:[…]}`; `trace_id` is the
 *      X-Request-Id response header when the answer carries headers
 *  C — `{success:true, ...payload}` / `{success:false, error:"message", code}`
 * Expected values may hold asymmetric matchers (`expect.any(String)`,
 * `expect.objectContaining({...})`).
 *
 * @example
 * const data = expectA(await s.req('GET', '/api/v1/auth/me', { headers }), 200);
 * expectAError(r, 429, 'rate_limited', { retry_after: expect.any(Number) });
 * expectBError(r, 503, 'mail_not_configured');
 * expectCError(r, 404, 'not_found');
 */
import { expect } from 'bun:test';

/** What a test holds of an answer: a Reply of test/helpers/server.ts, or the like. */
export interface Answer {
  status: number;
  body: any;
  headers?: { get(name: string): string | null };
}

export type Format = 'A' | 'B' | 'C';

/** A fetch Response as an Answer (reads the JSON body). */
export async function replyOf(res: Response): Promise<Answer> {
  return { status: res.status, headers: res.headers, body: await res.json() };
}

/** Status and body compared at once, so a failure shows both. */
function same(r: Answer, status: number, body: unknown): void {
  expect({ status: r.status, body: r.body }).toEqual({ status, body });
}

/** `data` is there (even when null); toEqual alone would take a missing key for `undefined`. */
function hasData(r: Answer): void {
  expect(typeof r.body === 'object' && r.body !== null && Object.hasOwn(r.body, 'data')).toBe(true);
}

/** Format A success with this status; `data` (when given) is the whole of `data`. Returns `data`. */
export function expectA<T = any>(r: Answer, status: number, data?: unknown): T {
  same(r, status, { success: true, data: data === undefined ? r.body?.data : data });
  hasData(r);
  return r.body.data;
}

/**
 * Format A error with this status and code: `message` a string, `retry_after` a number and
 * `details` an object when present, and nothing else; `extra` pins values (`message`,
 * `retry_after`, `details`).
 */
export function expectAError(r: Answer, status: number, code: string, extra: Record<string, unknown> = {}): void {
  const got = (typeof r.body?.error === 'object' && r.body.error) || {};
  const error = {
    code,
    message: expect.any(String),
    ...('retry_after' in got ? { retry_after: expect.any(Number) } : {}),
    ...('details' in got ? { details: expect.any(Object) } : {}),
    ...extra,
  };
  same(r, status, { success: false, error });
}

/** Format B meta: the request id (the X-Request-Id header when known) and a duration. */
function metaB(r: Answer) {
  const id = r.headers?.get('x-request-id');
  if (r.headers) expect(id).toEqual(expect.any(String));
  return { trace_id: id ?? expect.any(String), execution_ms: expect.any(Number) };
}

/** Format B success with this status; `data` (when given) is the whole of `data`. Returns `data`. */
export function expectB<T = any>(r: Answer, status: number, data?: unknown): T {
  same(r, status, { success: true, data: data === undefined ? r.body?.data : data, meta: metaB(r), errors: [] });
  hasData(r);
  return r.body.data;
}

/**
 * Format B error with this status and code: empty `data`, meta, and one error with a
 * string `message` and an object `details`; `extra` pins values (`message`, `details`).
 */
export function expectBError(r: Answer, status: number, code: string, extra: Record<string, unknown> = {}): void {
  same(r, status, {
    success: false,
    data: {},
    meta: metaB(r),
    errors: [{ code, message: expect.any(String), details: expect.any(Object), ...extra }],
  });
}

/**
 * Format C success with this status: `payload` (when given) is every field beside
 * `success`; without it, `success: true` and no error fields. Returns the body.
 */
export function expectC<T = any>(r: Answer, status: number, payload?: Record<string, unknown>): T {
  if (payload) same(r, status, { success: true, ...payload });
  else {
    same(r, status, { ...r.body, success: true });
    expect(r.body).not.toHaveProperty('error');
    expect(r.body).not.toHaveProperty('code');
  }
  return r.body;
}

/** Format C error with this status and code; `message` (when given) pins the message. */
export function expectCError(r: Answer, status: number, code: string, message: unknown = expect.any(String)): void {
  same(r, status, { success: false, error: message, code });
}

/** The error assertion of `format`, for tables that cross areas. */
export function expectFormatError(
  format: Format,
  r: Answer,
  status: number,
  code: string,
  extra: Record<string, unknown> = {},
): void {
  if (format === 'A') expectAError(r, status, code, extra);
  else if (format === 'B') expectBError(r, status, code, extra);
  else expectCError(r, status, code, extra.message ?? expect.any(String));
}
