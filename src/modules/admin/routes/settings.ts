/** Settings screen (docs/admin-api.md §Settings) and the SMTP test send. */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { signedIn } from '../guard';
import { Bodies } from '../model';
import { Responses, reply } from '../responses';
import { changeSetting, listSettings } from '../settings';

export function settingsRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  return app
    .get('/settings', () => ok({ settings: listSettings(p) }), { response: reply(Responses.settings) })
    .put(
      '/settings/:key',
      async ({ params, body, admin }) =>
        ok({ setting: await changeSetting(p, signedIn(admin).actor, params.key, body.value) }),
      { body: Bodies.value, response: reply(Responses.setting) },
    )
    .delete(
      '/settings/:key',
      async ({ params, admin }) =>
        ok({ setting: await changeSetting(p, signedIn(admin).actor, params.key, undefined) }),
      { response: reply(Responses.setting) },
    );
}
