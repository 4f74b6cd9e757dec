/** API keys screen (docs/admin-api.md §API keys), through KeyService. */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { signedIn } from '../guard';
import { AdminErrors } from '../errors';
import { KeyErrors } from '../../keys/errors';
import { Bodies } from '../model';
import { Responses, reply, replyCreated } from '../responses';
import type { CreateKeyInput } from '../../keys/model';
import { createKey, revokeKey } from '../changes';

export function keysRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  return app
    .get('/keys', async () => ok({ keys: await p.services.keys.list() }), { response: reply(Responses.keys) })
    .post(
      '/keys',
      async ({ body, set, admin }) => {
        const { actor } = signedIn(admin);
        // Every field as sent: validateKeyInput checks each and names what is wrong (Bodies.createKey).
        const created = await createKey(p, actor, { ...body, expiresAt: body.expires_at } as CreateKeyInput);
        const { key: secret, ...key } = created;
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return ok({ key, secret });
      },
      { body: Bodies.createKey, response: replyCreated(Responses.createdKey) },
    )
    .post(
      '/keys/:id/revoke',
      async ({ params, admin }) => {
        const { actor } = signedIn(admin);
        try {
          const key = await revokeKey(p, actor, params.id);
          return ok({ key });
        } catch (e) {
          if (KeyErrors.notFound.is(e)) throw AdminErrors.notFound(`The API key '${String(params.id).slice(0, 64)}'`);
          throw e;
        }
      },
      { response: reply(Responses.key) },
    );
}
