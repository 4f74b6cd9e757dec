/**
 * Users screen (docs/admin-api.md §Users). Each action and its audit row share one
 * transaction; disabling or deleting ends the user's sessions on every instance at once.
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import type { Queryable } from '../../../db/engine';
import { AdminErrors } from '../errors';
import { AuthErrors } from '../../auth/errors';
import { linkBase } from '../../auth/mailer';
import { clientMeta, signedIn } from '../guard';
import { Queries } from '../model';
import type { AdminUserView } from '../../auth/user-directory';
import { writeAudit } from '../audit';
import { Bodies } from '../model';
import { Responses, reply, replyCreated } from '../responses';
import { checkUserInput, createUser, markUserVerified, setUserEmail, setUserPassword } from '../../auth/admin-users';
import { userById } from '../../auth/users';

type Action = (p: Basalt, user: AdminUserView, tx: Queryable) => Promise<unknown>;

const actions: Record<string, Action> = {
  verify: (p, u, tx) => markUserVerified(p.services.auth, tx, u.id),
  disable: (p, u, tx) => p.services.auth.setDisabled(u.id, true, tx),
  enable: (p, u, tx) => p.services.auth.setDisabled(u.id, false, tx),
  'end-sessions': (p, u, tx) => p.services.auth.sessions.revokeUser(u.id, 'admin', undefined, tx),
  unlock: (p, u, tx) => p.services.auth.unlock(u.email, tx),
};

const taken = (email: string) => AdminErrors.conflict(`A user with the e-mail ${email} already exists.`);

/**
 * Why the verification mail cannot be sent to `u` now, in words an operator can act on;
 * null when it can. The link must lead to the site's page, never to this panel's address
 * (docs/auth.md, "Links in mails").
 */
function verificationMail(p: Basalt, u: AdminUserView): string | null {
  if (u.email_verified_at) return null;
  if (!p.services.mail.isConfigured())
    return 'Mail is not configured: set mail.smtp_url and mail.from in Settings first.';
  if (!linkBase(p, 'verify_email', ''))
    return 'The mail needs a link to your site: set web.public_base_url (or auth.verify_email_url) in Settings first, or mark the address verified.';
  return null;
}

export function usersRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  const find = async (id: string, q: Queryable = p.db) => {
    const u = await p.services.auth.userDetail(id, q);
    if (!u) throw AdminErrors.notFound(`The user '${String(id).slice(0, 64)}'`);
    return u;
  };
  let a = app
    .get('/users', async ({ query }) => ok(await p.services.auth.searchUsers(query)), {
      query: Queries.users,
      response: reply(Responses.users),
    })
    .get(
      '/users/:id',
      async ({ params }) => {
        const user = await find(params.id);
        return ok({
          user,
          sessions: await p.services.auth.userSessions(user.id),
          lock: await p.services.auth.lockState(user.email),
          verification_mail: verificationMail(p, user),
        });
      },
      { response: reply(Responses.userDetail) },
    )
    .post(
      '/users',
      async ({ body, set, admin }) => {
        const input = await checkUserInput(p, body, ['email', 'password']);
        const user = await p.services.admin.audited(signedIn(admin).actor, 'users.create', async (tx, note) => {
          const row = await createUser(
            tx,
            { email: input.email!, hash: input.hash!, verified: body.verified === true },
            () => taken(input.email!),
          );
          note(row.id, { email: row.email, verified: body.verified === true });
          return (await p.services.auth.userDetail(row.id, tx))!;
        });
        set.status = 201;
        return ok({ user });
      },
      { body: Bodies.createUser, response: replyCreated(Responses.user) },
    )
    .post(
      '/users/:id/password',
      async ({ params, body, admin }) => {
        const input = await checkUserInput(p, body, ['password']);
        const user = await p.services.admin.audited(signedIn(admin).actor, 'users.password', async (tx, note) => {
          const u = await find(params.id, tx);
          await setUserPassword(p.services.auth, tx, (await userById(tx, u.id))!, input.hash!);
          note(u.id, { email: u.email, password: 'changed', sessions: 'ended' });
          return (await p.services.auth.userDetail(u.id, tx))!;
        });
        return ok({ user });
      },
      { body: Bodies.userPassword, response: reply(Responses.user) },
    )
    .patch(
      '/users/:id',
      async ({ params, body, admin }) => {
        const input = await checkUserInput(p, body, ['email']);
        const user = await p.services.admin.audited(signedIn(admin).actor, 'users.email', async (tx, note) => {
          const u = await find(params.id, tx);
          await setUserEmail(p.services.auth, tx, u.id, input.email!, () => taken(input.email!));
          note(u.id, { email: { before: u.email, after: input.email } }, input.email);
          return (await p.services.auth.userDetail(u.id, tx))!;
        });
        return ok({ user });
      },
      { body: Bodies.userEmail, response: reply(Responses.user) },
    )
    .delete(
      '/users/:id',
      async ({ params, admin }) => {
        await p.services.admin.audited(signedIn(admin).actor, 'users.delete', async (tx, note) => {
          const u = await find(params.id, tx);
          await p.services.auth.deleteUser(u.id, tx);
          note(u.id, { email: u.email });
        });
        return ok({});
      },
      { response: reply(Responses.empty) },
    )
    .post(
      '/users/:id/resend-verification',
      async ({ params, request, admin }) => {
        const { actor } = signedIn(admin);
        const u = await find(params.id);
        if (u.email_verified_at) throw AdminErrors.invalidState(`${u.email} is already verified.`);
        if (!p.services.mail.isConfigured()) throw AuthErrors.mailNotConfigured();
        const missing = verificationMail(p, u);
        if (missing) throw AdminErrors.invalidState(missing);
        // Public Auth's own path: its mail, its limits.
        await p.services.auth.resendVerification(u.email, { ...clientMeta(request), origin: '' });
        await writeAudit(p.db, actor, 'users.resend-verification', u.id, { email: u.email });
        return ok({ user: u });
      },
      { response: reply(Responses.user) },
    );
  for (const [name, act] of Object.entries(actions)) {
    a = a.post(
      `/users/:id/${name}`,
      async ({ params, admin }) => {
        const user = await p.services.admin.audited(signedIn(admin).actor, `users.${name}`, async (tx, note) => {
          const u = await find(params.id, tx);
          await act(p, u, tx);
          note(u.id, { email: u.email });
          return (await p.services.auth.userDetail(u.id, tx))!;
        });
        return ok({ user });
      },
      { response: reply(Responses.user) },
    );
  }
  return a;
}
