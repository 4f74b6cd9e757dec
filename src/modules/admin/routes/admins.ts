/**
 * Administrators (docs/admin-api.md §Administrators): who they are, whether sign-in is
 * locked for them and from which addresses someone keeps failing, and lifting a lock.
 * Creating and deleting administrators stays with the CLI (`basalt admin …`).
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { signedIn } from '../guard';
import { Bodies } from '../model';
import { Responses, reply } from '../responses';

export function adminsRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  return app
    .get('/admins', async () => ok({ admins: await p.services.admin.listWithLocks() }), {
      response: reply(Responses.admins),
    })
    .post(
      '/admins/unlock',
      async ({ body, admin }) => ok(await p.services.admin.unlock(body.email, signedIn(admin).actor)),
      { body: Bodies.unlock, response: reply(Responses.adminUnlocked) },
    );
}
