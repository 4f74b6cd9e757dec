/**
 * An operator's changes to a site user's sign-in methods — reset the second factor,
 * unlink a provider — for the admin API (routes/user-sign-in.ts) and the command line
 * (`basalt users reset-mfa|unlink`, ./commands.ts) alike; each change and its audit row
 * share one transaction (docs/admin-api.md §Users; docs/admin.md).
 */
import type { Basalt } from '../../services';
import type { Actor } from './audit';
import { AdminErrors } from './errors';
import type { AdminUserView } from '../auth/user-directory';
import { isUuid } from '../../util/uuid';
import { identitiesOf, unlinkIdentity } from '../auth/identities';
import { removeTotp } from '../auth/totp';
import { SignInErrors } from '../auth/sign-in-errors';
import { normalizeEmail, userByEmail } from '../auth/users';

/** The user named by id or e-mail address (any spelling), or 404. */
export async function findUser(p: Basalt, idOrEmail: string): Promise<AdminUserView> {
  const id = isUuid(idOrEmail) ? idOrEmail : (await userByEmail(p.db, normalizeEmail(idOrEmail)))?.id;
  const user = id ? await p.services.auth.userDetail(id) : undefined;
  if (!user) throw AdminErrors.notFound(`The user '${String(idOrEmail).slice(0, 64)}'`);
  return user;
}

/** Turn the user's second factor off (and drop the recovery codes); says whether there was one. */
export function resetUserMfa(p: Basalt, user: AdminUserView, actor: Actor): Promise<boolean> {
  return p.services.admin.audited(actor, 'users.reset-mfa', async (tx, note) => {
    const removed = await removeTotp(tx, user.id);
    note(user.id, { removed }, user.email);
    return removed;
  });
}

/**
 * Unlink a provider identity of the user, named by its id or by its provider's name (the
 * one identity of that provider). Never the last way to sign in: 409 `last_sign_in_method`.
 */
export async function unlinkUserIdentity(
  p: Basalt,
  user: AdminUserView,
  identity: string,
  actor: Actor,
): Promise<{ id: string; provider: string }> {
  const mine = await identitiesOf(p.db, user.id);
  const found = isUuid(identity) ? mine.filter((i) => i.id === identity) : mine.filter((i) => i.provider === identity);
  if (found.length > 1)
    throw AdminErrors.field('identity', `the user has ${found.length} ${identity} identities: name one by its id`);
  const target = found[0];
  if (!target) throw SignInErrors.identityNotFound();
  await p.services.admin.audited(actor, 'users.unlink-identity', async (tx, note) => {
    const r = await unlinkIdentity(tx, user.id, target.id);
    if (r === 'not_found') throw SignInErrors.identityNotFound();
    // The same rule as for the user: set a password first (or keep another provider).
    if (r === 'last') throw SignInErrors.lastSignInMethod();
    note(user.id, { identity: target.id, provider: target.provider }, user.email);
  });
  return { id: target.id, provider: target.provider };
}
