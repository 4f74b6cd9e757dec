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

/** The endpoints of provider metadata that Basalt or a browser it sends there use. */
const ENDPOINTS = ['authorization_endpoint', 'token_endpoint', 'jwks_uri', 'userinfo_endpoint'] as const;

/** A URL named by a provider's metadata that the scheme/host rule refuses (the message names the field, not the URL). */
class EndpointRefused extends Error {}

/**
 * The scheme/host rule for every URL a provider's metadata names, at sign-in and in the
 * provider check alike: https, or plain http to this machine for a provider on this
 * machine (the rule for the issuer itself, httpOptions); no credentials in the URL. So a
 * discovery document cannot point Basalt's requests (the client secret, the JWKS fetch)
 * at plain http elsewhere or at another host's internal addresses over http (`0.0.0.0`,
 * `169.254.169.254`). oauth4webapi alone lets an allowed-insecure (loopback) issuer name
 * http endpoints anywhere.
 */
function checkEndpoints(p: Provider, as: oauth.AuthorizationServer): void {
  const local = isLoopback(p.issuer);
  for (const field of ENDPOINTS) {
    const value = as[field];
    if (value === undefined) continue;
    const u = typeof value === 'string' && URL.canParse(value) ? new URL(value) : undefined;
    if (!u) throw new EndpointRefused(`${field} is not a URL`);
    const ok =
      !u.username &&
      !u.password &&
      (u.protocol === 'https:' || (u.protocol === 'http:' && local && isLoopback(u.href)));
    if (!ok)
      throw new EndpointRefused(
        `${field}: scheme/host refused (https only; plain http only to this machine, for a provider on this machine)`,
      );
  }
}

/**
 * What went wrong fetching a provider's document, without any of its content (the
 * provider check shows this to the administrator; a document at an internal address
 * must not be read back through it): the HTTP status, not JSON, the wrong issuer, a
 * scheme/host refused, unreachable.
 */
export function fetchProblem(e: unknown): string {
  if (e instanceof EndpointRefused) return e.message;
  if (e instanceof oauth.OperationProcessingError) {
    switch (e.code) {
      case oauth.RESPONSE_IS_NOT_CONFORM:
        return e.cause instanceof Response ? `answered HTTP ${e.cause.status}` : 'answered with an unexpected status';
      case oauth.RESPONSE_IS_NOT_JSON:
      case oauth.PARSE_ERROR:
        return 'the answer is not JSON';
      case oauth.INVALID_RESPONSE:
        return 'the answer is not a JSON object naming an issuer';
      case oauth.JSON_ATTRIBUTE_COMPARISON:
        return 'wrong issuer: the document names another issuer than the configured one';
      case oauth.HTTP_REQUEST_FORBIDDEN:
      case oauth.REQUEST_PROTOCOL_FORBIDDEN:
        return 'scheme/host refused (https only; plain http only to this machine, for a provider on this machine)';
      case oauth.MISSING_SERVER_METADATA:
      case oauth.INVALID_SERVER_METADATA:
        return 'the metadata lacks an endpoint or names an invalid one';
    }
  }
  if (e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError'))
    return `no answer within ${HTTP_TIMEOUT_MS / 1000} s`;
  const code = (e as { code?: unknown })?.code;
  return `could not be reached${typeof code === 'string' && /^[A-Za-z_]{1,40}$/.test(code) ? ` (${code})` : ''}`;
}

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
  checkEndpoints(p, as);
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

/** One step of the provider check: passed, failed, or could not tell (`null`). */
export interface CheckStep {
  step: 'discovery' | 'jwks' | 'authorization_url' | 'token_endpoint';
  ok: boolean | null;
  detail: string;
}

/** The authorization URL step when the callback's base is not known (the public API on its own listener). */
const NO_PUBLIC_BASE =
  'no public base URL known: the public API has its own listener (web.public_api_separate) and web.public_base_url is empty; set web.public_base_url to where browsers reach the public API, the callback to register is under it';

/** Why a step failed: our own messages as they are, a fetch's failure without the fetched content. */
const why = (e: unknown) => (e instanceof StepFailed ? e.message : fetchProblem(e));

/** A step's own finding, worded here (never content of a fetched document). */
class StepFailed extends Error {}

/**
 * The JWKS at `jwksUri` (already past the scheme/host rule): how many signing keys it
 * holds. Redirects are not followed (the rule would not see where they lead).
 */
async function signingKeys(jwksUri: string): Promise<number> {
  const r = await fetch(jwksUri, { redirect: 'manual', signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
  if (r.status !== 200) {
    await r.body?.cancel();
    throw new StepFailed(
      `jwks_uri answered HTTP ${r.status}${r.status >= 300 && r.status < 400 ? ' (redirects are not followed)' : ''}`,
    );
  }
  let doc: unknown;
  try {
    doc = JSON.parse(await r.text());
  } catch {
    throw new StepFailed('jwks_uri: the answer is not JSON');
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new StepFailed('jwks_uri: the answer has no "keys" list');
  return keys.filter(
    (k: { use?: unknown } | null) => k && typeof k === 'object' && (k.use === undefined || k.use === 'sig'),
  ).length;
}

/** Token endpoint errors that mean "the client is known, the code is not" (RFC 6749 §5.2; GitHub's own). */
const CLIENT_ACCEPTED = new Set(['invalid_grant', 'bad_verification_code']);
const CLIENT_REFUSED = new Set(['invalid_client', 'unauthorized_client', 'incorrect_client_credentials']);

/**
 * The Settings screen's "test sign-in" (docs/auth.md, OAuth2 and OpenID Connect): every step
 * of a sign-in that needs no person at the provider, against the live provider, nothing
 * cached. (1) discovery — the metadata fetched afresh, its issuer the configured one, an
 * authorization and a token endpoint, PKCE S256 offered when the provider lists its
 * methods (GitHub: fixed endpoints); (2) JWKS — the signing keys ID tokens are checked
 * against, fetched and counted (OpenID Connect only); (3) the authorization URL this
 * instance would send a browser to, built with PKCE, state and nonce for `callbackUrl`
 * (null when no public base URL is known: the step fails and says so, nothing is guessed);
 * (4) the token endpoint — a made-up code traded with the configured client id and secret:
 * `invalid_grant` (GitHub: `bad_verification_code`) means the provider knows the client,
 * `invalid_client` means the id or secret is wrong. Signs nobody in; links nothing.
 */
export async function providerCheck(
  p: Provider,
  callbackUrl: string | null,
): Promise<{
  name: string;
  kind: Provider['kind'];
  issuer: string;
  ok: boolean;
  authorization_endpoint: string | null;
  authorization_url: string | null;
  redirect_uri: string | null;
  problem: string | null;
  checks: CheckStep[];
}> {
  const checks: CheckStep[] = [];
  let as: oauth.AuthorizationServer | undefined;
  let url: string | null = null;
  try {
    discovered.delete(p.issuer);
    as = await serverOf(p);
    if (!as.authorization_endpoint || !as.token_endpoint)
      throw new StepFailed('the metadata names no authorization or token endpoint');
    const pkce = as.code_challenge_methods_supported;
    if (Array.isArray(pkce) && !pkce.includes('S256')) throw new StepFailed('PKCE S256 not offered');
    checks.push({
      step: 'discovery',
      ok: true,
      detail:
        p.kind === 'github'
          ? `GitHub endpoints under ${p.issuer}`
          : `${p.issuer}/.well-known/openid-configuration: issuer matches, endpoints present`,
    });
  } catch (e) {
    checks.push({ step: 'discovery', ok: false, detail: why(e) });
  }
  if (as && p.kind === 'oidc') {
    try {
      if (!as.jwks_uri) throw new StepFailed('the metadata names no jwks_uri');
      const signing = await signingKeys(as.jwks_uri);
      if (!signing) throw new StepFailed('jwks_uri holds no signing key');
      checks.push({ step: 'jwks', ok: true, detail: `${signing} signing key(s) at ${as.jwks_uri}` });
    } catch (e) {
      checks.push({ step: 'jwks', ok: false, detail: why(e) });
    }
  }
  if (as) {
    try {
      if (callbackUrl === null) throw new StepFailed(NO_PUBLIC_BASE);
      url = (await authorizationUrl(p, callbackUrl)).url;
      checks.push({
        step: 'authorization_url',
        ok: true,
        detail: `redirect_uri ${callbackUrl} (register it at the provider)`,
      });
    } catch (e) {
      checks.push({ step: 'authorization_url', ok: false, detail: why(e) });
    }
    try {
      checks.push(await probeToken(p, as, callbackUrl));
    } catch (e) {
      checks.push({ step: 'token_endpoint', ok: false, detail: why(e) });
    }
  }
  const failed = checks.find((c) => c.ok === false);
  return {
    name: p.name,
    kind: p.kind,
    issuer: p.issuer,
    ok: !failed,
    authorization_endpoint: as?.authorization_endpoint ?? null,
    authorization_url: url,
    redirect_uri: callbackUrl,
    problem: failed ? `${failed.step}: ${failed.detail}` : null,
    checks,
  };
}

/**
 * Step 4: a made-up code traded with the configured client credentials; what the provider
 * says of the client. Without a callback URL the trade carries no redirect_uri.
 */
async function probeToken(p: Provider, as: oauth.AuthorizationServer, callbackUrl: string | null): Promise<CheckStep> {
  const body = new URLSearchParams({
    grant_type: 'authorization_code',
    code: `basalt-check-${oauth.generateRandomState()}`,
    ...(callbackUrl === null ? {} : { redirect_uri: callbackUrl }),
    client_id: p.clientId,
    client_secret: p.clientSecret,
    code_verifier: oauth.generateRandomCodeVerifier(),
  });
  const r = await fetch(as.token_endpoint!, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body,
    signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
  });
  let error: unknown;
  try {
    error = ((await r.json()) as { error?: unknown }).error;
  } catch {}
  // Only error codes named here are repeated: nothing else of the answer is shown.
  const known = typeof error === 'string' && (CLIENT_ACCEPTED.has(error) || CLIENT_REFUSED.has(error));
  const said = known ? error : `HTTP ${r.status}`;
  if (typeof error === 'string' && CLIENT_ACCEPTED.has(error))
    return { step: 'token_endpoint', ok: true, detail: `client id and secret accepted (a made-up code → ${said})` };
  if (typeof error === 'string' && CLIENT_REFUSED.has(error))
    return { step: 'token_endpoint', ok: false, detail: `client id or secret refused (${said})` };
  return {
    step: 'token_endpoint',
    ok: null,
    detail: `reachable; could not tell whether the client is accepted (a made-up code → ${said})`,
  };
}
