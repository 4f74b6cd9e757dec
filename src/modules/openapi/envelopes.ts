/**
 * The error envelopes as src/http/envelope.ts `errorBody` writes them (README.md, What it serves), and
 * the response headers the platform sends, as named parts of the OpenAPI document.
 * Every error of an area is rendered by that one function, so one schema per format is
 * the whole truth about error bodies.
 */
import { t } from 'elysia';
import { Type } from '@sinclair/typebox';

export const ErrorA = t.Object(
  {
    success: t.Literal(false),
    error: t.Object({
      code: t.String({ description: 'Stable code, e.g. validation_error, invalid_json, api_key_required, invalid_credentials, rate_limited.' }),
      message: t.String({ description: 'What is wrong and what to do, safe to show.' }),
      retry_after: t.Optional(Type.Integer({ minimum: 0, description: 'Seconds to wait (429 only); also in the Retry-After header.' })),
      details: t.Optional(t.Record(t.String(), t.Unknown(), { description: 'For validation_error: {"fields": {field: problem}}; other codes may add facts (e.g. {"column": "email"}).' })),
    }),
  },
  { title: 'ErrorA', description: 'Format A error (auth, Database API, runtime config).', example: { success: false, error: { code: 'rate_limited', message: 'Too many attempts; try again in 42 seconds.', retry_after: 42 } } },
);

export const MetaB = t.Object(
  {
    trace_id: t.String({ description: 'Same as the X-Request-Id response header.' }),
    execution_ms: t.Number({ description: 'Time spent on the request, in milliseconds.' }),
  },
  { title: 'MetaB', description: 'Format B meta.' },
);

export const ErrorB = t.Object(
  {
    success: t.Literal(false),
    data: t.Object({}, { description: 'Always empty on an error.', maxProperties: 0 }),
    meta: MetaB,
    errors: t.Array(
      t.Object({
        code: t.String({ description: 'Stable code, e.g. validation_error, mail_not_configured, rate_limited.' }),
        message: t.String(),
        details: t.Record(t.String(), t.Unknown(), { description: 'Field problems ({"fields": {...}}), retry_after for 429, or empty.' }),
      }),
      { minItems: 1 },
    ),
  },
  { title: 'ErrorB', description: 'Format B error (mail, extension routes).' },
);

export const ErrorC = t.Object(
  {
    success: t.Literal(false),
    error: t.String({ description: 'The message, safe to show.' }),
    code: t.String({ description: 'Stable code, e.g. not_found, payload_too_large.' }),
  },
  { title: 'ErrorC', description: 'Format C error (Files).' },
);

export const headerComponents = {
  XRequestId: { description: 'Id of this request: the X-Request-Id the client sent (1–128 of A-Z a-z 0-9 . _ : -) or a new UUID.', required: true, schema: { type: 'string' } },
  RetryAfter: { description: 'Seconds to wait before retrying.', required: true, schema: { type: 'integer', minimum: 0 } },
  ETag: { description: 'Strong ETag of the content: the quoted SHA-256.', required: true, schema: { type: 'string' } },
  ContentRange: { description: '`bytes start-end/size` of the part sent.', required: true, schema: { type: 'string' } },
  ContentRangeUnsatisfied: { description: '`bytes */size`: the size of the file.', schema: { type: 'string' } },
  AcceptRanges: { description: '`bytes`.', schema: { type: 'string' } },
  ContentDisposition: { description: '`inline` for images, audio, video, PDF and plain text; `attachment` for the rest or with `?download`; with the file name.', schema: { type: 'string' } },
  LastModified: { description: 'Upload time.', schema: { type: 'string' } },
  IdempotentReplayed: { description: '`true` when this answer replays the first one for the same Idempotency-Key (nothing was sent again).', schema: { type: 'string', enum: ['true'] } },
  WWWAuthenticate: { description: 'Bearer challenge on a rejected access token.', schema: { type: 'string' } },
};
