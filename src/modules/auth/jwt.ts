/**
 * Access tokens: HS256 JWTs signed and verified with @elysiajs/jwt (jose underneath).
 * The plugin's `sign`/`verify` are taken from its decorator so the same code serves
 * route handlers and `requireUser()` guards that only hold a Request.
 */
import { jwt } from '@elysiajs/jwt';

/** Lifetime of an access token. Short because revocation is also checked per request. */
export const ACCESS_TOKEN_SECONDS = 15 * 60;
const ISSUER = 'basalt';

export interface AccessClaims {
  /** User id. */
  sub: string;
  /** Session id: the token dies with its session. */
  sid: string;
}

export type VerifyResult = { ok: true; claims: AccessClaims } | { ok: false; reason: 'invalid' | 'expired' };

export interface AccessTokens {
  sign(claims: AccessClaims): Promise<string>;
  verify(token: string): Promise<VerifyResult>;
}

interface Signer {
  sign(v: Record<string, unknown>): Promise<string>;
  verify(token?: string, options?: Record<string, unknown>): Promise<Record<string, unknown> | false>;
}

/**
 * The only shape an access token may have (docs/auth.md, Tokens and sessions): three
 * base64url segments without padding, the last an HS256 signature — 32 bytes, so
 * exactly 43 characters whose last one carries no stray low bits. One signature has
 * one spelling; a trailing `=` or another encoding of the same bytes is refused.
 */
const SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;
/** User and session ids are UUIDs; anything else is refused before it reaches a query. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function accessTokens(secret: string): AccessTokens {
  const plugin = jwt({ name: 'accessToken', secret, alg: 'HS256', iss: ISSUER, exp: `${ACCESS_TOKEN_SECONDS}s` });
  const signer = (plugin as unknown as { decorator: { accessToken: Signer } }).decorator.accessToken;
  // Only HS256 with our issuer, and only tokens that expire: a token with alg "none",
  // another issuer or no `exp` never passes, however it is signed.
  const strict = { algorithms: ['HS256'], issuer: ISSUER, requiredClaims: ['exp', 'iat', 'sub', 'sid'] };
  return {
    sign: (claims) => signer.sign({ sub: claims.sub, sid: claims.sid }),
    async verify(token) {
      if (!SHAPE.test(token)) return { ok: false, reason: 'invalid' };
      const payload = await signer.verify(token, strict);
      if (payload) {
        const { sub, sid } = payload;
        if (typeof sub === 'string' && typeof sid === 'string' && UUID.test(sub) && UUID.test(sid)) return { ok: true, claims: { sub, sid } };
        return { ok: false, reason: 'invalid' };
      }
      // Tell "expired" from "forged": verify again ignoring the clock. Only failures pay this.
      const late = await signer.verify(token, { ...strict, clockTolerance: 10 * 365 * 86_400 });
      return { ok: false, reason: late ? 'expired' : 'invalid' };
    },
  };
}
