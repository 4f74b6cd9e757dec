/**
 * Schemas of the Mail API, in its area's envelope (format B, src/http/areas.ts). They validate
 * requests and are the source of the OpenAPI document.
 */
import { t, type Static, type TSchema } from 'elysia';
import { AREA } from '../../http/areas';
import { successOf } from '../../http/envelope-schemas';
import { Type } from '@sinclair/typebox';

/** A plain JSON-Schema integer (Elysia's t.Integer also accepts numeric strings, which a response never holds). */
const Int = () => Type.Integer();

export const SendBody = t.Object(
  {
    to: t.Array(t.String({ maxLength: 320 }), {
      minItems: 1,
      description: 'Recipient addresses (local@domain), 1 to mail.max_recipients (default 50).',
      examples: [['ada@example.com']],
    }),
    subject: t.Optional(
      t.String({
        maxLength: 998,
        description: "Subject; overrides the template's. Required without a template. No line breaks.",
      }),
    ),
    template: t.Optional(
      t.String({ maxLength: 100, description: 'Name of a stored template (Liquid), e.g. password_reset.' }),
    ),
    variables: t.Optional(
      t.Record(t.String(), t.Any(), {
        description: 'Template variables; every variable the template uses must be given.',
      }),
    ),
    text: t.Optional(t.String({ description: 'Plain-text body, sent as is (without a template).' })),
    html: t.Optional(t.String({ description: 'HTML body, sent as is (without a template).' })),
    sync: t.Optional(
      t.Boolean({
        default: false,
        description:
          'true: answer 200 once the SMTP server accepted the message (502 if it refused). false: queue it and answer 202.',
      }),
    ),
    idempotency_key: t.Optional(
      t.String({
        description: 'UUID; same as the Idempotency-Key header.',
        examples: ['0b6a8f0e-2b1c-4e53-9d0f-6f2f1c1c9a11'],
      }),
    ),
  },
  { title: 'MailSendRequest', additionalProperties: false },
);
export type SendBodyT = typeof SendBody.static;

const success = successOf(AREA.mail);
const ok = <T extends TSchema>(data: T, description: string, title: string) => success(data, { description, title });

export const SendResultSchema = t.Object(
  {
    job_id: t.String({ format: 'uuid' }),
    sync: t.Boolean(),
    recipient_count: Int(),
  },
  { title: 'MailSendResult' },
);
/** The `data` of a send answer. */
export type SendResult = Static<typeof SendResultSchema>;

export const Sent = ok(SendResultSchema, 'Sent (sync): the SMTP server accepted the message.', 'MailSent');
export const Queued = ok(SendResultSchema, 'Queued (async): the job will be delivered with retries.', 'MailQueued');

export const JobSchema = t.Object(
  {
    job_id: t.String({ format: 'uuid' }),
    state: t.Union(
      [
        t.Literal('queued'),
        t.Literal('sending'),
        t.Literal('sent'),
        t.Literal('failed'),
        t.Literal('dead'),
        t.Literal('cancelled'),
      ],
      {
        description:
          'queued → sending → sent; failed = waiting for a retry at next_attempt_at; dead = gave up; cancelled = taken out of the queue by an administrator.',
      },
    ),
    sync: t.Boolean(),
    recipient_count: Int(),
    template: t.Union([t.String(), t.Null()]),
    subject: t.String(),
    message_id: t.String({ description: 'Message-ID header of the message, stable across retries.' }),
    attempts: Int(),
    max_attempts: Int(),
    last_error: t.Union([t.String(), t.Null()]),
    next_attempt_at: t.Union([t.String({ format: 'date-time' }), t.Null()]),
    created_at: t.String({ format: 'date-time' }),
    updated_at: t.String({ format: 'date-time' }),
    sent_at: t.Union([t.String({ format: 'date-time' }), t.Null()]),
  },
  { title: 'MailJob' },
);
/** The public view of a job (GET /api/v1/mail/jobs/<id>, admin panel). No bodies. */
export type JobView = Static<typeof JobSchema>;

export const JobAnswer = ok(JobSchema, 'The job.', 'MailJobResult');
