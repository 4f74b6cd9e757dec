/**
 * What the ways to sign in beyond a password (./sign-in.ts, ./oauth-flow.ts) use of the
 * auth service (./service.ts): its lockout, its sessions and the end of every first
 * factor. Apart from the service, which builds them, so neither file imports the other.
 */
import type { RequestUser } from '../../http/user-guard';
import type { PublicUser } from './model';
import type { SessionStore } from './sessions';
import type { UserRow } from './users';

/** Facts about the HTTP request a service call needs. */
export interface ClientMeta {
  ip: string;
  userAgent: string | null;
  /** Origin of the request, for links when web.public_base_url is empty. */
  origin: string;
}

export interface TokenPair {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  refresh_expires_in: number;
}

/** A completed sign-in, or the second step it still needs (docs/auth.md, Second factor). */
export type SignInResult =
  | ({ user: PublicUser } & TokenPair)
  | { mfa_required: true; mfa_token: string; expires_in: number };

/** Who a valid access token belongs to. */
export type AuthenticatedUser = RequestUser;

/** The part of AuthService the sign-in methods are given. */
export interface SignInCore {
  readonly sessions: SessionStore;
  /** Refuse a source locked out of `email` (or everyone, past the backstop): 429 `account_locked`. */
  refuseLocked(email: string, ip: string): Promise<void>;
  /** A wrong password, code or second factor from `ip` on `email` (known or not). */
  countFailure(email: string, ip: string): Promise<void>;
  /** A new session signed in by `amr`. */
  issue(userId: string, meta: ClientMeta, amr?: readonly string[]): Promise<TokenPair>;
  /** The tokens, or the MFA step when the user has a second factor. */
  signedIn(row: UserRow, amr: readonly string[], meta: ClientMeta): Promise<SignInResult>;
  /** Run mail work after the answer is sent. */
  background(work: () => Promise<void>): void;
}
