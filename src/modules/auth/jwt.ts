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

export function accessTokens(secret: string): AccessTokens {
  const plugin = jwt({ name: 'accessToken', secret, alg: 'HS256', iss: ISSUER, exp: `${ACCESS_TOKEN_SECONDS}s` });
  const signer = (plugin as unknown as { decorator: { accessToken: Signer } }).decorator.accessToken;
  // Only HS256 with our issuer: a token with alg "none" or another issuer never passes.
  const strict = { algorithms: ['HS256'], issuer: ISSUER };
  return {
    sign: (claims) => signer.sign({ sub: claims.sub, sid: claims.sid }),
    async verify(token) {
      const payload = await signer.verify(token, strict);
      if (payload) {
        const { sub, sid } = payload;
        if (typeof sub === 'string' && typeof sid === 'string') return { ok: true, claims: { sub, sid } };
        return { ok: false, reason: 'invalid' };
      }
      // Tell "expired" from "forged": verify again ignoring the clock. Only failures pay this.
      const late = await signer.verify(token, { ...strict, clockTolerance: 10 * 365 * 86_400 });
      return { ok: false, reason: late ? 'expired' : 'invalid' };
    },
  };
}
