/**
 * Site users changed by an administrator (docs/admin-api.md §Users): create one, set a
 * password, mark the address verified, change the address. Public Auth's own rules
 * (e-mail spelling, password policy, argon2id, sessions) without its limits or mails.
 * Each change runs in the caller's transaction (the admin API's, with its audit row);
 * the password hash is made before it (`checkUserInput`), since on the embedded engine an
 * open transaction holds the whole database.
 */
import { PgError, type Queryable } from '../../db/engine';
import { validationError } from '../../http/errors';
import type { Platform } from '../../platform';
import type { AuthService } from './service';
import { hashPassword, passwordProblem } from './passwords';
import { checkEmail, insertUser, mixedScriptAddress, markVerified, setPasswordHash, type UserRow } from './users';

export interface CheckedUserInput {
  email?: string;
  hash?: string;
}

/**
 * The e-mail and password given (either may be left out unless `require`d), checked
 * together: a 400 `validation_error` names every field that is wrong at once. Returns
 * the normalized address and the password's hash.
 */
export async function checkUserInput(
  p: Platform,
  input: { email?: unknown; password?: unknown },
  require: ('email' | 'password')[],
): Promise<CheckedUserInput> {
  const fields: Record<string, string> = {};
  const out: CheckedUserInput = {};
  for (const f of require) if (input[f] === undefined || input[f] === '') fields[f] = 'is required';
  if (input.email !== undefined && !fields.email) {
    const r = typeof input.email === 'string' ? checkEmail(input.email) : null;
    if (!r) fields.email = 'must be a string';
    else if (!r.ok) fields.email = r.problem;
    else if (mixedScriptAddress(r.email))
      fields.email =
        'mixes scripts before @ or within one part of its domain (for example Latin and Cyrillic), which can imitate another address';
    else out.email = r.email;
  }
  if (input.password !== undefined && !fields.password) {
    const problem =
      typeof input.password === 'string'
        ? passwordProblem(input.password, p.settings.get('auth.password_min_length'))
        : 'must be a string';
    if (problem) fields.password = problem;
  }
  const named = Object.keys(fields);
  if (named.length)
    throw validationError(`Invalid request: ${named.map((f) => `${f}: ${fields[f]}`).join('; ')}`, fields);
  if (typeof input.password === 'string') out.hash = await hashPassword(input.password);
  return out;
}

/** A taken address: 409 from the caller's `taken()`; anything else as it was. */
function onEmail(e: unknown, taken: () => Error): never {
  if (e instanceof PgError && e.code === '23505') throw taken();
  if (e instanceof PgError && e.code === '23514')
    throw validationError('Invalid request: email: must be an e-mail address like name@example.com', {
      email: 'must be an e-mail address like name@example.com',
    });
  throw e;
}

/** Insert a user (checked by checkUserInput); `verified` marks the address verified now. */
export async function createUser(
  tx: Queryable,
  input: { email: string; hash: string; verified: boolean },
  taken: () => Error,
): Promise<UserRow> {
  const row = await insertUser(tx, input.email, input.hash).catch((e) => onEmail(e, taken));
  return input.verified ? (await markVerified(tx, row.id))! : row;
}

/** A new password: every session of the user ends, and a lockout of the address is lifted. */
export async function setUserPassword(auth: AuthService, tx: Queryable, user: UserRow, hash: string): Promise<void> {
  await setPasswordHash(tx, user.id, hash);
  await auth.sessions.revokeUser(user.id, 'password_reset', undefined, tx);
  await auth.unlock(user.email, tx);
}

/** Mark the address verified (no mail); cached records of the user follow on every instance. */
export async function markUserVerified(auth: AuthService, tx: Queryable, userId: string): Promise<void> {
  await markVerified(tx, userId);
  await auth.sessions.announce(`user:${userId}`, tx);
}

/**
 * Change the address. The new one is not verified yet (nobody proved the mailbox): mark it
 * verified, or send the verification mail. Sessions stay; cached records follow.
 */
export async function setUserEmail(
  auth: AuthService,
  tx: Queryable,
  userId: string,
  email: string,
  taken: () => Error,
): Promise<void> {
  await tx
    .query(
      'UPDATE basalt.users SET email = $2, email_verified_at = NULL, updated_at = now() WHERE id = $1 AND email <> $2',
      [userId, email],
    )
    .catch((e) => onEmail(e, taken));
  await auth.sessions.announce(`user:${userId}`, tx);
}
