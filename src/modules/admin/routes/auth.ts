/**
 * Sign-in and setup (docs/admin-api.md §Sign-in and setup). The cookie carries the
 * session token; the body carries the CSRF token the panel echoes in X-CSRF-Token.
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { clearedCookie, clientMeta, cookieToken, isHttps, sessionCookie, signedIn } from '../guard';
import { Bodies } from '../model';
import { Responses, reply, replyCreated } from '../responses';
import type { SignedIn } from '../service';

export function authRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  const admin = () => p.services.admin;
  const signIn = (request: Request, set: { headers: Record<string, unknown> }, s: SignedIn) => {
    set.headers['set-cookie'] = sessionCookie(s.token, isHttps(request), admin().lifetimes().maxHours * 3600);
    set.headers['cache-control'] = 'no-store';
    return ok({ admin: s.admin, csrf_token: s.csrf_token });
  };
  return (
    app
      // Open (no 401): the panel asks here first, so a signed-out browser logs no failed request.
      .get(
        '/auth/state',
        async ({ request }) =>
          ok({
            setup_required: await admin().setupRequired(),
            signed_in: !!(await admin().session(cookieToken(request.headers))),
          }),
        { response: reply(Responses.authState) },
      )
      .post(
        '/auth/setup',
        async ({ body, request, set }) => {
          const s = await admin().setup(body.token, body.email, body.password, clientMeta(request));
          set.status = 201;
          return signIn(request, set, s);
        },
        { body: Bodies.setup, response: replyCreated(Responses.session) },
      )
      .post(
        '/auth/login',
        async ({ body, request, set }) =>
          signIn(request, set, await admin().login(body.email, body.password, clientMeta(request))),
        { body: Bodies.login, response: reply(Responses.session) },
      )
      .get(
        '/auth/me',
        async ({ set, admin: a }) => {
          const { session } = signedIn(a);
          set.headers['cache-control'] = 'no-store';
          return ok({ admin: await admin().me(session), csrf_token: session.csrfToken });
        },
        { response: reply(Responses.session) },
      )
      .post(
        '/auth/logout',
        async ({ set, admin: a }) => {
          const { session, actor, https } = signedIn(a);
          await admin().logout(session, actor);
          set.headers['set-cookie'] = clearedCookie(https);
          return ok({});
        },
        { response: reply(Responses.empty) },
      )
      .post(
        '/auth/password',
        async ({ body, admin: a }) => {
          const { session, actor } = signedIn(a);
          return ok({ admin: await admin().changePassword(session, body.current_password, body.new_password, actor) });
        },
        { body: Bodies.password, response: reply(Responses.admin) },
      )
  );
}
