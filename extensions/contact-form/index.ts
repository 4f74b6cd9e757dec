/**
 * contact-form: a public endpoint a static site posts its contact form to
 * (JSON or a plain HTML form). Validated, rate-limited per client IP (counters
 * in the database), and mailed to the operator through a template it ensures.
 * It uses every part of `ctx` an extension author needs; docs/extensions.md walks
 * through it.
 */
import { defineExtension, t } from 'basalt';
import { TEMPLATE } from './template';
import { countSubmission, purgeOld } from './rate-limit';

const Submission = t.Object({
  name: t.String({ minLength: 1, maxLength: 200, description: 'Sender name.' }),
  email: t.String({
    format: 'email',
    maxLength: 254,
    description: 'Sender address (shown to the operator for replies).',
  }),
  subject: t.Optional(t.String({ maxLength: 200 })),
  message: t.String({ minLength: 1, maxLength: 5000 }),
  /** Honeypot: a field hidden from people; bots fill it in. */
  website: t.Optional(t.String({ maxLength: 500, description: 'Leave empty (spam trap: hide this field with CSS).' })),
});

export default defineExtension({
  name: 'contact-form',
  version: '1.0.0',
  description: 'Public contact form endpoint that mails the operator.',
  settings: {
    to: {
      kind: 'string',
      default: '',
      description: 'Address that receives the messages; empty → the form answers 503.',
    },
    rate_limit_per_hour: {
      kind: 'int',
      default: 5,
      min: 1,
      max: 10_000,
      description: 'Submissions per client IP per hour.',
    },
    redirect_url: {
      kind: 'string',
      default: '',
      description: 'Where a plain HTML form post is sent after success (303); empty → JSON answer.',
    },
  },

  async setup(ctx) {
    await ctx.mail.ensureTemplate(TEMPLATE);
    // Old rate-limit counters go hourly, once across all instances (a cron run is a job: retried, in the panel).
    ctx.cron('purge-rate-limits', '17 * * * *', () => purgeOld(ctx.db));
    // A message the mail module gave up on (dead after its retries) is not lost silently: the
    // operator's log says so, durably (the event is recorded in the commit that marked it dead).
    ctx.on('mail.failed', (event) => {
      const to = ctx.settings.get<string>('to');
      if (to && event.to?.includes(to))
        ctx.log.error('a contact form message could not be delivered; see the mail job', { job_id: event.job_id });
    });

    ctx.routes.post(
      '/submit',
      async ({ body, request, set }) => {
        const to = ctx.settings.get<string>('to');
        if (!to)
          throw new ctx.AppError(
            503,
            'not_configured',
            'The contact form has no recipient yet; the operator must set ext.contact-form.to.',
          );
        const ip = ctx.clientIp(request);
        const hit = await countSubmission(ctx.db, ip, ctx.settings.get<number>('rate_limit_per_hour'));
        if (!hit.allowed)
          throw ctx.errors.rateLimited(hit.retryAfter, 'Too many messages from this address; try again later.');

        if (body.website) {
          // A bot filled the hidden field: answer as usual so it learns nothing, send nothing.
          ctx.log.info('contact form spam dropped', { ip });
        } else {
          try {
            await ctx.mail.send({
              to: [to],
              template: TEMPLATE.name,
              variables: { name: body.name, email: body.email, subject: body.subject ?? '', message: body.message, ip },
            });
          } catch (e) {
            // A 400 here is the operator's doing (a bad `to`, a template edited to need other
            // variables), not the visitor's: say so without echoing the details.
            if (!(e instanceof ctx.AppError) || e.status !== 400) throw e;
            ctx.log.error('contact form message refused by the mail module', { cause: e.message });
            throw new ctx.AppError(
              503,
              'not_configured',
              'The contact form cannot deliver messages right now; the operator must check ext.contact-form.to and the contact_form_message template.',
            );
          }
          // A live "new message" signal for dashboards (docs/realtime.md, channels): who wrote
          // what stays in the mail; every follower of contact-form:submissions may see this.
          await ctx.realtime.publish('submissions', { received_at: new Date().toISOString() });
        }
        const redirect = ctx.settings.get<string>('redirect_url');
        const isForm = !(request.headers.get('content-type') ?? '').toLowerCase().includes('json');
        if (redirect && isForm) return new Response(null, { status: 303, headers: { Location: redirect } });
        set.status = 202;
        return ctx.reply(request, { accepted: true });
      },
      {
        body: Submission,
        response: {
          202: ctx.schemas.envelope(t.Object({ accepted: t.Literal(true) })),
        },
        detail: {
          summary: 'Send a contact form message',
          // Statuses and codes this route answers besides its schema's, for the OpenAPI document.
          'x-codes': { 429: ['rate_limited'], 503: ['not_configured'] },
          responses: {
            303: {
              description: 'A plain HTML form post when `redirect_url` is set: see Location.',
              headers: { Location: { schema: { type: 'string' as const } } },
            },
          },
          description:
            'JSON, urlencoded or multipart form. 202 when queued for delivery to the operator; 303 to `redirect_url` for a plain form post when set. ' +
            '400 validation_error with details.fields; 429 rate_limited (per IP, ext.contact-form.rate_limit_per_hour); 503 when no recipient or mail is configured.',
        },
      },
    );
  },
});
