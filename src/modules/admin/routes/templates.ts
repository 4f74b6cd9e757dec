/**
 * Mail templates screen (docs/admin-api.md §Mail templates), through the mail
 * module's template store: the same checks as `basalt templates put` and the Mail API.
 */
import type { Platform } from '../../../platform';
import type { AdminApp, Ok } from '../routes';
import { signedIn } from '../guard';
import { templateStore, templateVariables, type MailTemplate } from '../../mail/templates';
import { AdminErrors } from '../errors';
import { Bodies } from '../model';

const view = (t: MailTemplate) => ({
  name: t.name,
  subject: t.subject,
  html: t.html,
  text: t.text,
  variables: templateVariables(t),
  updated_at: t.updated_at ?? null,
});

export function templatesRoutes(app: AdminApp, p: Platform, ok: Ok): AdminApp {
  const templates = () => p.services.mail.templates;
  return app
    .get('/templates', async () =>
      ok({
        templates: (await templates().list()).map((t) => ({
          name: t.name,
          subject: t.subject,
          updated_at: t.updated_at ?? null,
        })),
      }),
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
        });
      },
      { body: Bodies.preview },
    )
    .get('/templates/:name', async ({ params }) => {
      const t = await templates().get(params.name);
      if (!t) throw AdminErrors.notFound(`The template '${String(params.name).slice(0, 100)}'`);
      return ok({ template: view(t) });
    })
    .put(
      '/templates/:name',
      async ({ params, body, admin }) => {
        const t = await p.services.admin.audited(signedIn(admin).actor, 'templates.put', async (tx, note) => {
          const before = await templateStore(tx).get(params.name);
          const saved = await templateStore(tx).put({
            name: params.name,
            subject: body.subject,
            html: body.html ?? null,
            text: body.text ?? null,
          });
          note(saved.name, {
            created: !before,
            subject: { before: before?.subject ?? null, after: saved.subject },
            html_chars: saved.html?.length ?? 0,
            text_chars: saved.text?.length ?? 0,
          });
          return saved;
        });
        return ok({ template: view(t) });
      },
      { body: Bodies.template },
    )
    .delete('/templates/:name', async ({ params, admin }) => {
      await p.services.admin.audited(signedIn(admin).actor, 'templates.delete', async (tx, note) => {
        if (!(await templateStore(tx).delete(params.name)))
          throw AdminErrors.notFound(`The template '${String(params.name).slice(0, 100)}'`);
        note(params.name);
      });
      return ok({});
    });
}
