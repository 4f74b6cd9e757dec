/**
 * The user check: a Bearer access token → the signed-in site user, through one narrow
 * input, the authenticator Public Auth provides (docs/auth.md). Which errors a refused
 * token gets (401 `unauthorized`, `token_expired`, `session_revoked`, 403
 * `account_disabled`) is the authenticator's business; they are AppErrors, so each
 * area renders them in its own envelope. Routes use it through the guard plugin
 * (src/http/guards.ts).
 */
import { requestInfo } from './request-info';

/** The signed-in user behind a request. */
export interface RequestUser {
  userId: string;
  sessionId: string;
  email: string;
  /** How the session was signed in and its assurance level, from the access token (docs/auth.md, Second factor). */
  amr?: string[];
  aal?: 1 | 2;
}

/** The token of an `Authorization: Bearer …` header (undefined when there is none) → its user, or throws. */
export type Authenticator = (token: string | undefined) => Promise<RequestUser>;

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(request: Request): string | undefined {
  const h = request.headers.get('authorization');
  const m = h ? /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i.exec(h) : null;
  return m?.[1];
}

/** Whether the request carries an Authorization header at all. */
export function sendsAuthorization(request: Request): boolean {
  return request.headers.has('authorization');
}

/** The user of `request`'s bearer token (or the authenticator's refusal), noted on the request for the request log. */
export async function requestUser(authenticate: Authenticator, request: Request): Promise<RequestUser> {
  const user = await authenticate(bearerToken(request));
  requestInfo(request).userId = user.userId;
  return user;
}
