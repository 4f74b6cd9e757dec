/**
 * Access tokens: HS256 JWTs signed and verified with jose's public API (`SignJWT`,
 * `jwtVerify`), so the same code serves route handlers and the user guard, which
 * only holds a token.
 */
import { jwtVerify, SignJWT, type JWTPayload, type JWTVerifyOptions } from 'jose';
import { isUuid } from '../../util/uuid';

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

/**
 * The only shape an access token may have (docs/auth.md, Tokens and sessions): three
 * base64url segments without padding, the last an HS256 signature — 32 bytes, so
 * exactly 43 characters whose last one carries no stray low bits. One signature has
 * one spelling; a trailing `=` or another encoding of the same bytes is refused.
 */
const SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;

/**
 * Only HS256 with our issuer, and only tokens that expire: a token with alg "none",
 * another issuer or no `exp` never passes, however it is signed.
 */
const STRICT: JWTVerifyOptions = {
  algorithms: ['HS256'],
  issuer: ISSUER,
  requiredClaims: ['exp', 'iat', 'sub', 'sid'],
};
/** The same checks without the clock: tells an expired token from a forged one. */
const IGNORING_THE_CLOCK: JWTVerifyOptions = { ...STRICT, clockTolerance: 10 * 365 * 86_400 };

export function accessTokens(secret: string): AccessTokens {
  // Imported once: handed the raw bytes, jose would import them into a CryptoKey on every call.
  const key = crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(secret),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign', 'verify'],
  );
  /** The payload when `token` passes `options`, else null (jose throws on every refusal). */
  const check = async (token: string, options: JWTVerifyOptions): Promise<JWTPayload | null> => {
    try {
      return (await jwtVerify(token, await key, options)).payload;
    } catch {
      return null;
    }
  };
  return {
    // Header {alg, typ}; payload iss, sub, sid, then exp and iat.
    sign: async (claims) =>
      new SignJWT({ iss: ISSUER, sub: claims.sub, sid: claims.sid })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setExpirationTime(`${ACCESS_TOKEN_SECONDS}s`)
        .setIssuedAt(new Date())
        .sign(await key),
    async verify(token) {
      if (!SHAPE.test(token)) return { ok: false, reason: 'invalid' };
      const payload = await check(token, STRICT);
      if (payload) {
        const { sub, sid } = payload;
        // User and session ids are UUIDs; anything else is refused before it reaches a query.
        if (typeof sub === 'string' && typeof sid === 'string' && isUuid(sub) && isUuid(sid))
          return { ok: true, claims: { sub, sid } };
        return { ok: false, reason: 'invalid' };
      }
      // Tell "expired" from "forged": verify again ignoring the clock. Only failures pay this.
      return { ok: false, reason: (await check(token, IGNORING_THE_CLOCK)) ? 'expired' : 'invalid' };
    },
  };
}
