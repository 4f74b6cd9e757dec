/**
 * Sign-in and setup (docs/admin-api.md §Sign-in and setup). The cookie carries the
 * session token; the body carries the CSRF token the panel echoes in X-CSRF-Token.
 */
import type { AnyElysia } from 'elysia';
import type { Platform } from '../../../platform';
import { clearedCookie, clientMeta, isHttps, sessionCookie } from '../guard';
import { Bodies } from '../model';
import type { SignedIn } from '../service';

const ok = <T>(data: T) => ({ success: true as const, data });

export function authRoutes(app: AnyElysia, p: Platform): AnyElysia {
  const admin = () => p.services.admin;
  const signIn = (request: Request, set: { headers: Record<string, unknown> }, s: SignedIn) => {
    set.headers['set-cookie'] = sessionCookie(s.token, isHttps(request), admin().lifetimes().maxHours * 3600);
    set.headers['cache-control'] = 'no-store';
    return ok({ admin: s.admin, csrf_token: s.csrf_token });
  };
  return app
    .get('/auth/state', async () => ok({ setup_required: await admin().setupRequired() }))
    .post(
      '/auth/setup',
      async ({ body, request, set }: any) => {
        const s = await admin().setup(body.token, body.email, body.password, clientMeta(request));
        set.status = 201;
        return signIn(request, set, s);
      },
      { body: Bodies.setup },
    )
    .post('/auth/login', async ({ body, request, set }: any) => signIn(request, set, await admin().login(body.email, body.password, clientMeta(request))), {
      body: Bodies.login,
    })
    .get('/auth/me', async ({ set, admin: a }: any) => {
      set.headers['cache-control'] = 'no-store';
      return ok({ admin: await admin().me(a.session), csrf_token: a.session.csrfToken });
    })
    .post('/auth/logout', async ({ set, admin: a }: any) => {
      await admin().logout(a.session, a.actor);
      set.headers['set-cookie'] = clearedCookie(a.https);
      return ok({});
    })
    .post(
      '/auth/password',
      async ({ body, admin: a }: any) => {
        return ok({ admin: await admin().changePassword(a.session, body.current_password, body.new_password, a.actor) });
      },
      { body: Bodies.password },
    );
}
