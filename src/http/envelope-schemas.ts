/**
 * The three response envelopes as schemas, declared once (README.md, What it serves):
 * src/http/envelope.ts renders exactly these bodies, routes declare them as their
 * responses through their area (`successOf(area)`, `errorsOf(area)`: the area's letter in
 * src/http/areas.ts, so route and model files name none), the OpenAPI document names them (ErrorA, ErrorB, ErrorC, MetaB), and the
 * body types are their `Static<>`.
 *  A — `{success:true, data}` / `{success:false, error:{code, message, retry_after?, details?}}`
 *  B — `{success, data, meta:{trace_id, execution_ms}, errors:[…]}`
 *  C — `{success:true, ...payload}` / `{success:false, error:"message", code}`
 */
import { t, type Static, type TSchema } from 'elysia';
// TypeBox's own Integer: a plain JSON-Schema integer (Elysia's t.Integer also accepts digit strings).
import { KindGuard, Type, type ObjectOptions, type TObject, type TUnsafe } from '@sinclair/typebox';

/** The envelope letter of an area (src/http/areas.ts). */
export type Format = 'A' | 'B' | 'C';

/** Format A success body around `data`; a PascalCase `title` names it in the OpenAPI document. */
function SuccessA<T extends TSchema>(data: T, options?: ObjectOptions) {
  return t.Object({ success: t.Literal(true), data }, options);
}

export const ErrorA = t.Object(
  {
    success: t.Literal(false),
    error: t.Object({
      code: t.String({
        description:
          'Stable code, e.g. validation_error, invalid_json, api_key_required, invalid_credentials, rate_limited.',
      }),
      message: t.String({ description: 'What is wrong and what to do, safe to show.' }),
      retry_after: t.Optional(
        Type.Integer({
          minimum: 0,
          description: 'Seconds to wait (429, 503 database_busy); also in the Retry-After header.',
        }),
      ),
      details: t.Optional(
        t.Record(t.String(), t.Unknown(), {
          description:
            'For validation_error: {"fields": {field: problem}}; other codes may add facts (e.g. {"column": "email"}).',
        }),
      ),
    }),
  },
  {
    title: 'ErrorA',
    description: 'Format A error (auth, Database API, runtime config).',
    example: {
      success: false,
      error: { code: 'rate_limited', message: 'Too many attempts; try again in 42 seconds.', retry_after: 42 },
    },
  },
);

export const MetaB = t.Object(
  {
    trace_id: t.String({ description: 'Same as the X-Request-Id response header.' }),
    execution_ms: t.Number({ description: 'Time spent on the request, in milliseconds.' }),
  },
  { title: 'MetaB', description: 'Format B meta.' },
);

/** Format B success body around `data`: `errors` is always empty. */
function SuccessB<T extends TSchema>(data: T, options?: ObjectOptions) {
  return t.Object({ success: t.Literal(true), data, meta: MetaB, errors: t.Array(t.Any(), { maxItems: 0 }) }, options);
}

export const ErrorB = t.Object(
  {
    success: t.Literal(false),
    data: t.Object({}, { description: 'Always empty on an error.', maxProperties: 0 }),
    meta: MetaB,
    errors: t.Array(
      t.Object({
        code: t.String({ description: 'Stable code, e.g. validation_error, mail_not_configured, rate_limited.' }),
        message: t.String(),
        details: t.Record(t.String(), t.Unknown(), {
          description: 'Field problems ({"fields": {...}}), retry_after for 429 and 503 database_busy, or empty.',
        }),
      }),
      { minItems: 1 },
    ),
  },
  { title: 'ErrorB', description: 'Format B error (mail, extension routes).' },
);

/** Format C success body: `success: true` and the payload's fields at the top level. */
function SuccessC<T extends TObject>(payload: T, options?: ObjectOptions) {
  return t.Composite([t.Object({ success: t.Literal(true) }), payload], options);
}

export const ErrorC = t.Object(
  {
    success: t.Literal(false),
    error: t.String({ description: 'The message, safe to show.' }),
    code: t.String({ description: 'Stable code, e.g. not_found, payload_too_large.' }),
  },
  { title: 'ErrorC', description: 'Format C error (Files).' },
);

export const ErrorSchemas = { A: ErrorA, B: ErrorB, C: ErrorC } as const;

/**
 * The error statuses a route answers, as its `response` entries: `{ 401: ErrorA, … }`.
 * The OpenAPI document lists each status with the codes the route and the layers
 * around it answer (route `detail['x-codes']`), in the area's envelope.
 */
export function errorResponses<F extends Format>(
  format: F,
  ...statuses: number[]
): Record<number, (typeof ErrorSchemas)[F]> {
  return Object.fromEntries(statuses.map((s) => [s, ErrorSchemas[format]]));
}

/**
 * The error statuses of an area's routes, each with the area's own error body (its
 * envelope letter, src/http/areas.ts): `const errors = errorsOf(area)`, then
 * `response: { 200: …, ...errors(400, 401) }`. Route and model files name no letter.
 */
export function errorsOf<F extends Format>(area: { envelope: F }) {
  return (...statuses: number[]) => errorResponses(area.envelope, ...statuses);
}

/** The success body schema of envelope `F` around `T` (format C: `T`'s fields beside `success`). */
export type SuccessSchema<F extends Format, T extends TSchema> = F extends 'A'
  ? ReturnType<typeof SuccessA<T>>
  : F extends 'B'
    ? ReturnType<typeof SuccessB<T>>
    : T extends TObject
      ? ReturnType<typeof SuccessC<T>>
      : never;

/**
 * The success body of an area's routes, in the area's envelope (src/http/areas.ts):
 * `const ok = successOf(AREA.auth)`, then `ok(t.Object({…}), { title: 'AuthSession' })`;
 * a PascalCase `title` names it in the OpenAPI document. Typed for the area's letter, so
 * `Static<>` of it is the exact body. Model and route files name no letter.
 */
export function successOf<F extends Format>(area: { envelope: F }) {
  return <T extends TSchema>(data: T, options?: ObjectOptions): SuccessSchema<F, T> => {
    if (area.envelope === 'B') return SuccessB(data, options) as SuccessSchema<F, T>;
    if (area.envelope === 'C') {
      if (!KindGuard.IsObject(data))
        throw new TypeError('format C: the payload is a t.Object, whose fields sit beside success');
      return SuccessC(data, options) as SuccessSchema<F, T>;
    }
    return SuccessA(data, options) as SuccessSchema<F, T>;
  };
}

export type MetaBody = Static<typeof MetaB>;
/** A format A success body with `data` of type `T`. */
export type SuccessBodyA<T> = Static<ReturnType<typeof SuccessA<TUnsafe<T>>>>;
/** A format B success body with `data` of type `T`. */
export type SuccessBodyB<T> = Static<ReturnType<typeof SuccessB<TUnsafe<T>>>>;
/** A format C success body: `success: true` beside the payload's fields. */
export type SuccessBodyC<T> = { success: true } & T;
/** The success body of envelope `F` with `data` (format C: the payload) of type `T`. */
export type SuccessBodyOf<F extends Format, T> = F extends 'A'
  ? SuccessBodyA<T>
  : F extends 'B'
    ? SuccessBodyB<T>
    : SuccessBodyC<T>;
export type ErrorBodyA = Static<typeof ErrorA>;
export type ErrorBodyB = Static<typeof ErrorB>;
export type ErrorBodyC = Static<typeof ErrorC>;
