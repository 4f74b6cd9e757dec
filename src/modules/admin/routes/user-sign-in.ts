/**
 * A user's sign-in methods on the Users screen (docs/admin-api.md §Users, sign-in
 * methods), and the provider check of the Settings screen. Each change and its audit row
 * share one transaction.
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok, OtherAreas } from '../area';
import { AdminErrors } from '../errors';
import { signedIn } from '../guard';
import { isUuid } from '../../../util/uuid';
import { findUser, resetUserMfa, unlinkUserIdentity } from '../user-sign-in';
import { providerCheck } from '../../auth/oidc';
import { oauthCallbackUrl } from '../../auth/sign-in-routes';
import { Responses, reply } from '../responses';

export function userSignInRoutes(app: AdminApp, p: Basalt, ok: Ok, other: OtherAreas): AdminApp {
  const exists = async (id: string) => {
    if (!isUuid(id)) throw AdminErrors.notFound(`The user '${String(id).slice(0, 64)}'`);
    return findUser(p, id);
  };
  return app
    .get(
      '/users/:id/sign-in-methods',
      async ({ params }) => {
        await exists(params.id);
        return ok(await p.services.auth.methods.methods(params.id));
      },
      { response: reply(Responses.signInMethods) },
    )
    .post(
      '/users/:id/reset-mfa',
      async ({ params, admin }) => {
        await resetUserMfa(p, await exists(params.id), signedIn(admin).actor);
        return ok(await p.services.auth.methods.methods(params.id));
      },
      { response: reply(Responses.signInMethods) },
    )
    .delete(
      '/users/:id/identities/:identity',
      async ({ params, admin }) => {
        await unlinkUserIdentity(p, await exists(params.id), params.identity, signedIn(admin).actor);
        return ok(await p.services.auth.methods.methods(params.id));
      },
      { response: reply(Responses.signInMethods) },
    )
    .get('/sign-in-providers', async () => ok({ providers: p.services.auth.oauth.providerNames() }), {
      response: reply(Responses.providers),
    })
    .post(
      '/sign-in-providers/:name/check',
      async ({ params, request }) => {
        const provider = p.services.auth.oauth.provider(params.name);
        // The callback the start route registers. This request came in on the main listener,
        // which serves the public API too unless web.public_api_separate gives it its own:
        // then only web.public_base_url says where browsers reach it (null: not known).
        const onPublicListener = !p.settings.get('web.public_api_separate');
        const callback = oauthCallbackUrl(p, other.authRoot, provider.name, onPublicListener ? request : undefined);
        return ok(await providerCheck(provider, callback));
      },
      { response: reply(Responses.providerCheck) },
    );
}
