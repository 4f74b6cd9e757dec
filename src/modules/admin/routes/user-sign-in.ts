/**
 * A user's sign-in methods on the Users screen (docs/admin-api.md §Users, sign-in
 * methods), and the provider check of the Settings screen. Each change and its audit row
 * share one transaction.
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { AdminErrors } from '../errors';
import { signedIn } from '../guard';
import { userDetail } from '../users';
import { isUuid } from '../../../util/uuid';
import { unlinkIdentity } from '../../auth/identities';
import { removeTotp } from '../../auth/totp';
import { SignInErrors } from '../../auth/sign-in-errors';
import { providerCheck } from '../../auth/oidc';

export function userSignInRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  const exists = async (id: string) => {
    if (!isUuid(id) || !(await userDetail(p.db, id)))
      throw AdminErrors.notFound(`The user '${String(id).slice(0, 64)}'`);
  };
  return app
    .get('/users/:id/sign-in-methods', async ({ params }) => {
      await exists(params.id);
      return ok(await p.services.auth.methods.methods(params.id));
    })
    .post('/users/:id/reset-mfa', async ({ params, admin }) => {
      await exists(params.id);
      await p.services.admin.audited(signedIn(admin).actor, 'users.reset-mfa', async (tx, note) => {
        const removed = await removeTotp(tx, params.id);
        note(params.id, { removed });
      });
      return ok(await p.services.auth.methods.methods(params.id));
    })
    .delete('/users/:id/identities/:identity', async ({ params, admin }) => {
      await exists(params.id);
      await p.services.admin.audited(signedIn(admin).actor, 'users.unlink-identity', async (tx, note) => {
        const r = isUuid(params.identity) ? await unlinkIdentity(tx, params.id, params.identity) : 'not_found';
        if (r === 'not_found') throw SignInErrors.identityNotFound();
        // The same rule as for the user: set a password first (or keep another provider).
        if (r === 'last') throw SignInErrors.lastSignInMethod();
        note(params.id, { identity: params.identity });
      });
      return ok(await p.services.auth.methods.methods(params.id));
    })
    .get('/sign-in-providers', async () => ok({ providers: p.services.auth.oauth.providerNames() }))
    .post('/sign-in-providers/:name/check', async ({ params }) => {
      const provider = p.services.auth.oauth.provider(params.name);
      return ok(await providerCheck(provider));
    });
}
