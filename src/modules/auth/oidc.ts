/**
 * The provider side of a sign-in, through `oauth4webapi` (docs/auth.md, why this
 * library): OpenID Connect discovery, the authorization URL with PKCE S256, state and
 * nonce, the code exchange, and the ID token checked against the provider's JWKS
 * (signature, `iss`, `aud`, `exp`, `nonce`). GitHub is plain OAuth2: its user id and
 * primary e-mail (with GitHub's verified flag) come from its API.
 *
 * Providers come from the live setting `auth.oauth_providers` on every call, so a
 * change applies without a restart; discovery documents are cached 10 minutes.
 */
import * as oauth from 'oauth4webapi';
import type { Static } from '@sinclair/typebox';
import type { OAUTH_PROVIDER } from '../../config/schema';
import type { ProviderAccount } from './identities';
import { normalizeEmail, emailProblem } from './users';

export type ProviderSetting = Static<typeof OAUTH_PROVIDER>;

export interface Provider {
  name: string;
  kind: 'oidc' | 'github';
  issuer: string;
  clientId: string;
  clientSecret: string;
  scopes: string[];
  apiUrl: string;
}

const PRESETS: Record<string, Partial<Provider>> = {
  google: { kind: 'oidc', issuer: 'https://accounts.google.com' },
  github: { kind: 'github', issuer: 'https://github.com', apiUrl: 'https://api.github.com' },
};
const DISCOVERY_TTL_MS = 10 * 60_000;
const HTTP_TIMEOUT_MS = 10_000;

/** The provider `name` of the setting's list, presets filled in; undefined when absent or unusable. */
export function providerNamed(list: readonly ProviderSetting[], name: string): Provider | undefined {
  const s = list.find((p) => p.name === name);
  if (!s) return undefined;
  const preset = PRESETS[s.name] ?? {};
  const kind = s.kind ?? preset.kind ?? 'oidc';
  const issuer = (s.issuer ?? (preset.kind === kind ? preset.issuer : undefined))?.replace(/\/$/, '');
  if (!issuer || !URL.canParse(issuer)) return undefined;
  return {
    name: s.name,
    kind,
    issuer,
    clientId: s.client_id,
    clientSecret: s.client_secret,
    scopes: s.scopes ?? (kind === 'github' ? ['read:user', 'user:email'] : ['openid', 'email', 'profile']),
    apiUrl: (s.api_url ?? PRESETS.github!.apiUrl!).replace(/\/$/, ''),
  };
}

/**
 * Plain http is allowed only to a provider on this machine (development and the test
 * suite's provider); anything else must be https, as oauth4webapi requires.
 */
function isLoopback(url: string): boolean {
  const host = new URL(url).hostname;
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

function httpOptions(p: Provider) {
  return {
    [oauth.allowInsecureRequests]: isLoopback(p.issuer) && (p.kind !== 'github' || isLoopback(p.apiUrl)),
    signal: () => AbortSignal.timeout(HTTP_TIMEOUT_MS),
  };
}

const discovered = new Map<string, { as: oauth.AuthorizationServer; at: number }>();

/** The provider's authorization server metadata (discovery for OpenID Connect, fixed for GitHub). */
async function serverOf(p: Provider): Promise<oauth.AuthorizationServer> {
  if (p.kind === 'github')
    return {
      issuer: p.issuer,
      authorization_endpoint: `${p.issuer}/login/oauth/authorize`,
      token_endpoint: `${p.issuer}/login/oauth/access_token`,
    };
  const hit = discovered.get(p.issuer);
  if (hit && performance.now() - hit.at < DISCOVERY_TTL_MS) return hit.as;
  const issuer = new URL(p.issuer);
  const as = await oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...httpOptions(p) }),
  );
  discovered.set(p.issuer, { as, at: performance.now() });
  return as;
}

/** What a started flow must remember until its callback. */
export interface FlowSecrets {
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** The provider's authorization URL for a new flow, and the secrets to keep for its callback. */
export async function authorizationUrl(
  p: Provider,
  redirectUri: string,
): Promise<{ url: string; secrets: FlowSecrets }> {
  const as = await serverOf(p);
  const secrets: FlowSecrets = {
    state: oauth.generateRandomState(),
    nonce: oauth.generateRandomNonce(),
    codeVerifier: oauth.generateRandomCodeVerifier(),
  };
  const url = new URL(as.authorization_endpoint!);
  const q = url.searchParams;
  q.set('client_id', p.clientId);
  q.set('redirect_uri', redirectUri);
  q.set('response_type', 'code');
  q.set('scope', p.scopes.join(' '));
  q.set('state', secrets.state);
  q.set('code_challenge', await oauth.calculatePKCECodeChallenge(secrets.codeVerifier));
  q.set('code_challenge_method', 'S256');
  if (p.kind === 'oidc') q.set('nonce', secrets.nonce);
  return { url: url.href, secrets };
}

/** The provider said no (`access_denied`, …): its error code, for the front-end. */
export class ProviderDenied extends Error {
  constructor(readonly error: string) {
    super(`provider answered ${error}`);
  }
}

/** A provider e-mail in our spelling, or null when it is not a usable address. */
function addressOf(raw: unknown): string | null {
  if (typeof raw !== 'string') return null;
  const email = normalizeEmail(raw);
  return emailProblem(email) ? null : email;
}

/**
 * Finish a flow at its callback: check the authorization response (state), trade the code
 * (with the PKCE verifier), verify the ID token (signature against the JWKS, iss, aud, exp,
 * nonce) or, for GitHub, ask its API. Throws ProviderDenied for an error the provider
 * sent back, anything else for a failure on the way.
 */
export async function finishFlow(
  p: Provider,
  callback: URLSearchParams,
  redirectUri: string,
  secrets: FlowSecrets,
): Promise<ProviderAccount> {
  const as = await serverOf(p);
  const client: oauth.Client = { client_id: p.clientId };
  let params: URLSearchParams;
  try {
    params = oauth.validateAuthResponse(as, client, callback, secrets.state);
  } catch (e) {
    if (e instanceof oauth.AuthorizationResponseError) throw new ProviderDenied(e.error);
    throw e;
  }
  const methods = as.token_endpoint_auth_methods_supported;
  // GitHub and providers that say so take the secret in the body; the default is HTTP Basic.
  const auth =
    p.kind === 'github' || (methods && !methods.includes('client_secret_basic'))
      ? oauth.ClientSecretPost(p.clientSecret)
      : oauth.ClientSecretBasic(p.clientSecret);
  const opts = httpOptions(p);
  const response = await oauth.authorizationCodeGrantRequest(
    as,
    client,
    auth,
    params,
    redirectUri,
    secrets.codeVerifier,
    opts,
  );
  if (p.kind === 'github') {
    const result = await oauth.processAuthorizationCodeResponse(as, client, response);
    return githubAccount(p, result.access_token);
  }
  const result = await oauth.processAuthorizationCodeResponse(as, client, response, {
    expectedNonce: secrets.nonce,
    requireIdToken: true,
  });
  // The token endpoint is trusted by TLS alone in the OIDC core spec; we check the signature too.
  await oauth.validateApplicationLevelSignature(as, response, opts);
  const claims = oauth.getValidatedIdTokenClaims(result)!;
  let email: unknown = claims.email;
  let verified: unknown = claims.email_verified;
  if (email === undefined && as.userinfo_endpoint) {
    // Some providers put the address only in UserInfo; its `sub` must be the ID token's.
    const info = await oauth.processUserInfoResponse(
      as,
      client,
      claims.sub,
      await oauth.userInfoRequest(as, client, result.access_token, opts),
    );
    email = info.email;
    verified = info.email_verified;
  }
  const address = addressOf(email);
  return {
    provider: p.name,
    subject: claims.sub,
    email: address,
    emailVerified: address !== null && verified === true,
  };
}

/** GitHub: the numeric user id, and the primary address with GitHub's own verified flag. */
async function githubAccount(p: Provider, accessToken: string): Promise<ProviderAccount> {
  const get = async (path: string) => {
    const r = await fetch(`${p.apiUrl}${path}`, {
      headers: {
        authorization: `Bearer ${accessToken}`,
        accept: 'application/vnd.github+json',
        'user-agent': 'basalt',
      },
      signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    });
    if (!r.ok) throw new Error(`GitHub API ${path} answered ${r.status}`);
    return r.json() as Promise<unknown>;
  };
  const user = (await get('/user')) as { id?: unknown };
  if (typeof user.id !== 'number' && typeof user.id !== 'string') throw new Error('GitHub API /user has no id');
  const emails = (await get('/user/emails')) as { email?: unknown; primary?: unknown; verified?: unknown }[];
  const primary = Array.isArray(emails) ? emails.find((e) => e.primary === true) : undefined;
  const address = addressOf(primary?.email);
  return {
    provider: p.name,
    subject: String(user.id),
    email: address,
    emailVerified: address !== null && primary?.verified === true,
  };
}

/**
 * The Settings screen's provider check: can the provider's metadata be had (discovery for
 * OpenID Connect), and where does it send users. Never signs anyone in.
 */
export async function providerCheck(p: Provider): Promise<{
  name: string;
  kind: Provider['kind'];
  issuer: string;
  ok: boolean;
  authorization_endpoint: string | null;
  problem: string | null;
}> {
  const base = { name: p.name, kind: p.kind, issuer: p.issuer };
  try {
    const as = await serverOf(p);
    return { ...base, ok: true, authorization_endpoint: as.authorization_endpoint ?? null, problem: null };
  } catch (e) {
    return {
      ...base,
      ok: false,
      authorization_endpoint: null,
      problem: e instanceof Error ? e.message.slice(0, 300) : 'failed',
    };
  }
}
