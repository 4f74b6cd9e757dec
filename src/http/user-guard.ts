/**
 * The user guard: a Bearer access token issued by Public Auth → the signed-in user.
 * Used by Public Auth itself, the Files module and extensions. Errors are AppErrors,
 * so each area renders them in its own envelope:
 *  401 `unauthorized` (no/malformed/forged token), 401 `token_expired`,
 *  401 `session_revoked` (logout, password change, refresh-token reuse),
 *  403 `account_disabled`.
 *
 * @example
 * const user = await requireUser(p, request);
 * await listFilesOf(user.userId);
 */
import type { Platform } from '../platform';
import { AppError } from './errors';

const challenge = { 'WWW-Authenticate': 'Bearer error="invalid_token"' };

/** The errors of a rejected access token, shared with Public Auth. */
export const UserErrors = {
  unauthorized: (message = 'Send a valid access token: Authorization: Bearer <access_token>.') =>
    new AppError(401, 'unauthorized', message, { headers: { 'WWW-Authenticate': 'Bearer' } }),
  invalidToken: () => new AppError(401, 'unauthorized', 'The access token is invalid; log in again.', { headers: challenge }),
  tokenExpired: () =>
    new AppError(401, 'token_expired', 'The access token has expired; get a new one with POST /api/v1/auth/refresh.', { headers: challenge }),
  sessionRevoked: () =>
    new AppError(401, 'session_revoked', 'This session has ended (logout, password change or reuse of a refresh token); log in again.', {
      headers: challenge,
    }),
  accountDisabled: () => new AppError(403, 'account_disabled', 'This account is disabled; contact the site administrator.'),
};

/** The signed-in user behind a request. */
export interface RequestUser {
  userId: string;
  sessionId: string;
  email: string;
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(request: Request): string | undefined {
  const h = request.headers.get('authorization');
  const m = h ? /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i.exec(h) : null;
  return m?.[1];
}

/** Bearer access token → user, or throws one of `UserErrors`. */
export async function requireUser(p: Platform, request: Request): Promise<RequestUser> {
  const token = bearerToken(request);
  if (!token) throw UserErrors.unauthorized();
  return p.services.auth.authenticate(token);
}
