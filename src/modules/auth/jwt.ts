/**
 * Access tokens: HS256 JWTs, signed with jose's `SignJWT` and verified with fast-jwt's
 * synchronous verifier, so the same code serves route handlers and the user guard, which
 * only holds a token. Verification runs on every authenticated request: Bun's WebCrypto
 * HMAC (what jose verifies with) costs tens of microseconds of CPU per call at low
 * concurrency, node:crypto's HMAC (fast-jwt's) under one (docs/bench/2026-11-23-select-and-me-profiles.md).
 */
import { createVerifier, TokenError, type VerifierOptions } from 'fast-jwt';
import { SignJWT } from 'jose';
import { isUuid } from '../../util/uuid';
import { BoundedMap } from '../../util/bounded-map';

/**
 * Default lifetime of an access token (setting auth.access_token_seconds). Short because
 * revocation is also checked per request.
 */
export const ACCESS_TOKEN_SECONDS = 15 * 60;
const ISSUER = 'basalt';

export interface AccessClaims {
  /** User id. */
  sub: string;
  /** Session id: the token dies with its session. */
  sid: string;
  /**
   * How the session was signed in (`pwd`, `otp`, `oauth`, then `totp` or `recovery` for a
   * second factor) and the assurance level that follows (2 with a second factor, else 1);
   * row policies read them through basalt.jwt() (docs/auth.md, Second factor).
   */
  amr?: string[];
  aal?: 1 | 2;
}

export type VerifyResult = { ok: true; claims: AccessClaims } | { ok: false; reason: 'invalid' | 'expired' };

export interface AccessTokens {
  /** `seconds`: the token's lifetime (auth.access_token_seconds, read by the caller once per token pair). */
  sign(claims: AccessClaims, seconds?: number): Promise<string>;
  /** Synchronous: the check is a hash, and a promise per request costs more than it. */
  verify(token: string): VerifyResult;
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
 * another issuer, no `iss` or no `exp` never passes, however it is signed (fast-jwt checks
 * a claim's value only when the claim is there, so every claim we rely on is required).
 * The bench baselines verify with the same checks.
 */
export const ACCESS_TOKEN_CHECKS: Partial<VerifierOptions> = {
  algorithms: ['HS256'],
  allowedIss: ISSUER,
  requiredClaims: ['iss', 'exp', 'iat', 'sub', 'sid'],
  cache: false,
};

/** Assurance level of a sign-in: 2 when a second factor was shown, else 1. */
export function aalOf(amr: readonly string[]): 1 | 2 {
  return amr.includes('totp') || amr.includes('recovery') ? 2 : 1;
}

/** At most this many verified tokens are remembered (per secret); past it the least recently used goes. */
const VERIFIED_MAX = 10_000;

/**
 * A token that passed every check, with the window its time claims allow (ms since the
 * epoch): fast-jwt's only time-dependent checks are `nbf` (now ≥ nbf) and `exp` (now ≤ exp).
 */
interface Verified {
  result: VerifyResult & { ok: true };
  notBefore: number;
  expires: number;
}

export function accessTokens(secret: string): AccessTokens {
  // Imported once: handed the raw bytes, jose would import them into a CryptoKey on every call.
  const key = crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(secret),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  const strict = createVerifier({ ...ACCESS_TOKEN_CHECKS, key: secret });
  /** The same checks without the clock: tells an expired token from a forged one. */
  const ignoringTheClock = createVerifier({ ...ACCESS_TOKEN_CHECKS, key: secret, ignoreExpiration: true });
  /** The payload when `token` passes, else why not. */
  const check = (token: string): { payload?: Record<string, unknown>; expired?: boolean } => {
    try {
      return { payload: strict(token) };
    } catch (e) {
      // A token not yet valid (`nbf`) is refused as invalid, like a forged one.
      if (!(e instanceof TokenError) || e.code !== TokenError.codes.expired) return {};
      // Only failures pay for the second check.
      try {
        ignoringTheClock(token);
        return { expired: true };
      } catch {
        return {};
      }
    }
  };
  /**
   * Tokens that passed, by their text. A token's signature and claims are a function of its
   * text and the secret, so a token seen before needs only its time window checked again
   * (the same comparisons fast-jwt makes); one outside it takes the whole check, which
   * answers exactly as before (expired, or invalid before `nbf`). Nothing about the session
   * is remembered here: revocation is checked on every request after this (service.ts
   * `authenticate`, sessions.ts). Only tokens we signed get in, so the map cannot be filled
   * by a client; it holds live tokens (15 minutes) and is bounded (src/util/bounded-map.ts).
   */
  const verified = new BoundedMap<string, Verified>(VERIFIED_MAX);
  const remember = (token: string, result: Verified['result'], payload: Record<string, unknown>) => {
    const { nbf, exp } = payload as { nbf?: number; exp: number };
    verified.set(token, {
      result,
      notBefore: typeof nbf === 'number' ? nbf * 1000 : -Infinity,
      expires: exp * 1000,
    });
  };
  /** Each caller gets claims of its own, as from a check of its own (a caller may keep or change them). */
  const fresh = ({ claims: { sub, sid, amr, aal } }: Verified['result']): Verified['result'] =>
    amr ? { ok: true, claims: { sub, sid, amr: [...amr], aal } } : { ok: true, claims: { sub, sid } };
  /** The full check of a token's shape, signature and claims. */
  const full = (token: string): VerifyResult => {
    if (!SHAPE.test(token)) return { ok: false, reason: 'invalid' };
    const { payload, expired } = check(token);
    if (payload) {
      const { sub, sid, iat, amr } = payload;
      // User and session ids are UUIDs; anything else is refused before it reaches a query.
      if (typeof sub === 'string' && typeof sid === 'string' && typeof iat === 'number' && isUuid(sub) && isUuid(sid)) {
        // Tokens signed before amr existed carry none; ours always carry both, consistent.
        let result: Verified['result'];
        if (!Array.isArray(amr)) result = { ok: true, claims: { sub, sid } };
        else if (!amr.every((m) => typeof m === 'string')) return { ok: false, reason: 'invalid' };
        else result = { ok: true, claims: { sub, sid, amr, aal: aalOf(amr) } };
        remember(token, result, payload);
        return fresh(result);
      }
      return { ok: false, reason: 'invalid' };
    }
    return { ok: false, reason: expired ? 'expired' : 'invalid' };
  };
  return {
    // Header {alg, typ}; payload iss, sub, sid, amr, aal, then exp and iat.
    sign: async (claims, seconds = ACCESS_TOKEN_SECONDS) =>
      new SignJWT({
        iss: ISSUER,
        sub: claims.sub,
        sid: claims.sid,
        ...(claims.amr ? { amr: claims.amr, aal: claims.aal ?? aalOf(claims.amr) } : {}),
      })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setExpirationTime(`${seconds}s`)
        .setIssuedAt(new Date())
        .sign(await key),
    verify(token) {
      const known = verified.get(token);
      if (known) {
        const now = Date.now();
        if (now >= known.notBefore && now <= known.expires) return fresh(known.result);
        verified.delete(token);
      }
      return full(token);
    },
  };
}
