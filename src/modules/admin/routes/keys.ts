/** API keys screen (docs/admin-api.md §API keys), through KeyService. */
import type { Platform } from '../../../platform';
import type { AdminApp, Ok } from '../routes';
import { signedIn } from '../guard';
import { AppError } from '../../../http/errors';
import { AdminErrors } from '../errors';
import { Bodies } from '../model';
import type { CreateKeyInput } from '../../keys/model';

export function keysRoutes(app: AdminApp, p: Platform, ok: Ok): AdminApp {
  const keys = () => p.services.keys;
  return app
    .get('/keys', async () => ok({ keys: await keys().list() }))
    .post(
      '/keys',
      async ({ body, set, admin }) => {
        const { actor } = signedIn(admin);
        const created = await p.services.admin.audited(actor, 'keys.create', async (tx, note) => {
          // Every field as sent: validateKeyInput checks each and names what is wrong (Bodies.createKey).
          const k = await keys().create({ ...body, expiresAt: body.expires_at } as CreateKeyInput, tx);
          note(k.id, {
            type: k.type,
            name: k.name,
            service: k.service,
            permissions: k.permissions,
            tables: k.tables,
            expires_at: k.expires_at,
            site: k.site,
            display: k.display,
          });
          return k;
        });
        if (created.site) await p.settings.load(); // the site key setting was written in the transaction
        const { key: secret, ...key } = created;
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return ok({ key, secret });
      },
      { body: Bodies.createKey },
    )
    .post('/keys/:id/revoke', async ({ params, admin }) => {
      const { actor } = signedIn(admin);
      try {
        // The key's open transactions end and its waiting requests are refused first: on the
        // embedded engine one of them may hold the database the audited transaction needs.
        await keys().revoked(String(params.id));
        const key = await p.services.admin.audited(actor, 'keys.revoke', async (tx, note) => {
          const k = await keys().revoke(params.id, tx);
          note(k.id, { display: k.display });
          return k;
        });
        return ok({ key });
      } catch (e) {
        if (e instanceof AppError && e.code === 'key_not_found')
          throw AdminErrors.notFound(`The API key '${String(params.id).slice(0, 64)}'`);
        throw e;
      }
    });
}
