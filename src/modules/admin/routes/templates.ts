/**
 * Mail templates screen (docs/admin-api.md §Mail templates), through the mail
 * module's template store: the same checks as `basalt templates put` and the Mail API.
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { signedIn } from '../guard';
import { optionalTemplateVariables, templateVariables, type MailTemplate } from '../../mail/templates';
import { deleteTemplate, putTemplate } from '../changes';
import { writeAudit } from '../audit';
import { AdminErrors } from '../errors';
import { Bodies } from '../model';
import { Responses, reply } from '../responses';

const view = (t: MailTemplate) => ({
  name: t.name,
  subject: t.subject,
  html: t.html,
  text: t.text,
  variables: templateVariables(t),
  optional_variables: optionalTemplateVariables(t),
  updated_at: t.updated_at ?? null,
});

export function templatesRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  const templates = () => p.services.mail.templates;
  return app
    .get(
      '/templates',
      async () =>
        ok({
          templates: (await templates().list()).map((t) => ({
            name: t.name,
            subject: t.subject,
            updated_at: t.updated_at ?? null,
          })),
        }),
      { response: reply(Responses.templates) },
    )
    .post(
      '/templates/preview',
      async ({ body }) => {
        const input = { name: 'preview', subject: body.subject, html: body.html ?? null, text: body.text ?? null };
        const r = await templates().render(input, body.variables ?? {});
        return ok({
          subject: r.subject,
          html: r.html ?? null,
          text: r.text ?? null,
          variables: templateVariables(input),
          optional_variables: optionalTemplateVariables(input),
        });
      },
      { body: Bodies.preview, response: reply(Responses.preview) },
    )
    .post(
      '/templates/:name/test',
      async ({ params, body, admin }) => {
        // A real send of the stored template (a job in Mail jobs), now, with the SMTP server's answer.
        const { actor } = signedIn(admin);
        if (!(await templates().get(params.name)))
          throw AdminErrors.notFound(`The template '${String(params.name).slice(0, 100)}'`);
        try {
          const r = await p.services.mail.sendNow({
            to: [body.to],
            template: params.name,
            variables: body.variables ?? {},
          });
          await writeAudit(p.db, actor, 'templates.test', params.name, { to: body.to, ok: true, job_id: r.jobId });
          return ok({ job_id: r.jobId, message_id: r.messageId, response: r.response });
        } catch (e) {
          await writeAudit(p.db, actor, 'templates.test', params.name, {
            to: body.to,
            ok: false,
            error: (e as Error).message?.slice(0, 300),
          }).catch((err) => p.log.warn('could not audit a failed template test', { cause: err }));
          throw e;
        }
      },
      { body: Bodies.templateTest, response: reply(Responses.templateTest) },
    )
    .get(
      '/templates/:name',
      async ({ params }) => {
        const t = await templates().get(params.name);
        if (!t) throw AdminErrors.notFound(`The template '${String(params.name).slice(0, 100)}'`);
        return ok({ template: view(t) });
      },
      { response: reply(Responses.template) },
    )
    .put(
      '/templates/:name',
      async ({ params, body, admin }) => {
        const { template: t } = await putTemplate(p, signedIn(admin).actor, {
          name: params.name,
          subject: body.subject,
          html: body.html ?? null,
          text: body.text ?? null,
        });
        return ok({ template: view(t) });
      },
      { body: Bodies.template, response: reply(Responses.template) },
    )
    .delete(
      '/templates/:name',
      async ({ params, admin }) => {
        await deleteTemplate(p, signedIn(admin).actor, params.name);
        return ok({});
      },
      { response: reply(Responses.empty) },
    );
}
