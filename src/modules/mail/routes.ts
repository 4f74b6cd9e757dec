/**
 * Mail API routes (main listener, format B): POST /api/v1/mail/send and
 * GET /api/v1/mail/jobs/<job_id>. HTTP only; the work is in service.ts.
 */
import { rootOf, type AreaFacts } from '../../http/areas';
import { Elysia, t } from 'elysia';
import type { Basalt } from '../../services';
import { platformGuards } from '../../guards';
import { successResponse } from '../../http/envelope';
import { MailErrors } from './errors';
import { resolveIdempotencyKey } from './idempotency';
import { JobAnswer, Queued, SendBody, Sent } from './model';
import { errorsOf } from '../../http/envelope-schemas';

/** The success answer with this request's trace id and timing, serialized (src/http/envelope.ts `successResponse`). */
const reply = (request: Request, data: unknown, status = 200, headers?: Record<string, string>) =>
  successResponse(request, data, { status, headers });
const KNOWN = new Set(Object.keys(SendBody.properties));
function rejectUnknownFields(body: unknown) {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return;
  const unknown = Object.keys(body).filter((k) => !KNOWN.has(k));
  if (unknown.length) {
    throw MailErrors.invalid(
      `Unknown field(s) in the request: ${unknown.join(', ')}.`,
      Object.fromEntries(unknown.map((k) => [k, 'unknown field'])),
    );
  }
}

export function mailRoutes(p: Basalt, area: AreaFacts) {
  const errors = errorsOf(area);
  return (
    new Elysia({ name: 'basalt.mail', prefix: rootOf(area) })
      // The guard checks before body validation: a request without a valid key gets 401/403, not a 400.
      .use(platformGuards(p, p.services))
      .guard({ apiKey: 'mail:send' })
      .post(
        '/send',
        async ({ body, request, apiKey }) => {
          const idempotencyKey = resolveIdempotencyKey(request.headers, body.idempotency_key);
          const { idempotency_key: _drop, ...req } = body;
          const out = await p.services.mail.submit(req, { keyId: apiKey.id, idempotencyKey });
          return reply(request, out.data, out.status, out.replayed ? { 'idempotent-replayed': 'true' } : undefined);
        },
        {
          // Elysia would silently drop unknown fields; a typo (e.g. `tamplate`) must be a 400 instead.
          transform: ({ body }) => rejectUnknownFields(body),
          parse: 'json',
          body: SendBody,
          response: { 200: Sent, 202: Queued, ...errors(400, 401, 403, 404, 409, 413, 415, 422, 502, 503) },
          detail: {
            summary: 'Send an e-mail (template or inline), sync or queued',
            'x-codes': {
              401: ['unauthorized'],
              403: ['forbidden'],
              404: ['template_not_found'],
              409: ['idempotency_key_in_progress'],
              422: ['idempotency_key_reused'],
              502: ['mail_provider_error'],
              503: ['mail_not_configured'],
            },
            description:
              'Needs an API key with mail:send (or mail:*). `sync: false` (default) queues the message and answers 202; `sync: true` answers 200 once the SMTP server accepted it, 502 mail_provider_error otherwise. ' +
              'Idempotency: send a UUID in the Idempotency-Key (or X-Idempotency-Key) header or in idempotency_key. For 24 h, the same key with the same payload replays the first answer with `Idempotent-Replayed: true` and sends nothing; with a different payload → 422 idempotency_key_reused; while the first is still running → 409 idempotency_key_in_progress. ' +
              'Errors: 400 validation_error (naming the field or missing template variable), 404 template_not_found, 503 mail_not_configured.',
            security: [{ ApiKey: [] }],
            parameters: [
              {
                name: 'Idempotency-Key',
                in: 'header',
                required: false,
                schema: { type: 'string', format: 'uuid' },
                description: 'Makes the send safe to retry (24 h, per API key).',
              },
            ],
            // Beside each success schema: the replay header (the description is the schema's own).
            responses: {
              200: {
                description: Sent.description!,
                headers: { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } },
              },
              202: {
                description: Queued.description!,
                headers: { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } },
              },
            },
          },
        },
      )
      .get(
        '/jobs/:job_id',
        async ({ params, apiKey, request }) => {
          const job = await p.services.mail.jobs.get(params.job_id, apiKey.id);
          if (!job) throw MailErrors.jobNotFound();
          return reply(request, job);
        },
        {
          params: t.Object({ job_id: t.String({ description: 'job_id from the send answer.' }) }),
          response: { 200: JobAnswer, ...errors(401, 403, 404) },
          detail: {
            summary: 'State of a mail job',
            'x-codes': { 401: ['unauthorized'], 403: ['forbidden'], 404: ['job_not_found'] },
            description:
              'State, attempts, last error and timestamps of a job, for the API key that created it (any other key gets 404).',
            security: [{ ApiKey: [] }],
          },
        },
      )
  );
}
