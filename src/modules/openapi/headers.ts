/**
 * The response headers the platform sends, as named parts of the OpenAPI document
 * (`components.headers`). The envelopes' schemas are src/http/envelope-schemas.ts.
 */
export const headerComponents = {
  XRequestId: {
    description: 'Id of this request: the X-Request-Id the client sent (1–128 of A-Z a-z 0-9 . _ : -) or a new UUID.',
    required: true,
    schema: { type: 'string' },
  },
  RetryAfter: {
    description: 'Seconds to wait before retrying.',
    required: true,
    schema: { type: 'integer', minimum: 0 },
  },
  RetryAfterBusy: {
    description:
      'Seconds to wait before retrying: sent with `database_busy` (the database had no connection free in time) and `restarting` (a new version taking over did not serve in time).',
    schema: { type: 'integer', minimum: 0 },
  },
  ETag: { description: 'Strong ETag of the content: the quoted SHA-256.', required: true, schema: { type: 'string' } },
  ContentRange: { description: '`bytes start-end/size` of the part sent.', required: true, schema: { type: 'string' } },
  ContentRangeUnsatisfied: { description: '`bytes */size`: the size of the file.', schema: { type: 'string' } },
  AcceptRanges: { description: '`bytes`.', schema: { type: 'string' } },
  ContentDisposition: {
    description:
      '`inline` for images, audio, video, PDF and plain text; `attachment` for the rest or with `?download`; with the file name.',
    schema: { type: 'string' },
  },
  LastModified: { description: 'Upload time.', schema: { type: 'string' } },
  IdempotentReplayed: {
    description: '`true` when this answer replays the first one for the same Idempotency-Key (nothing was sent again).',
    schema: { type: 'string', enum: ['true'] },
  },
  WWWAuthenticate: { description: 'Bearer challenge on a rejected access token.', schema: { type: 'string' } },
};
