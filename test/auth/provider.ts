/**
 * A real OpenID Connect provider in the test process (oauth2-mock-server on 127.0.0.1:
 * discovery, JWKS, authorize with PKCE and nonce, token endpoint, RS256 ID tokens), a
 * GitHub-style API beside it (/user, /user/emails) for the plain-OAuth2 preset, and a
 * driver that walks a sign-in over HTTP as a browser would (redirects by hand, the
 * cookie kept), so each step can be inspected or tampered with.
 */
import { OAuth2Server } from 'oauth2-mock-server';
import type { TestServer } from '../helpers/server';

export interface ProviderUser {
  sub: string;
  email?: string;
  email_verified?: boolean;
}

export interface TestProvider {
  /** http://127.0.0.1:<port> — the OIDC issuer. */
  issuer: string;
  /** The GitHub-style web origin (a second server with GitHub's /login/oauth/* paths). */
  githubOrigin: string;
  /** The GitHub-style API's base URL. */
  apiUrl: string;
  /** Who the provider signs in next (every following sign-in until changed). */
  as(user: ProviderUser): void;
  /** What the GitHub-style API says next: the user id and its addresses. */
  github(id: number, emails: { email: string; primary: boolean; verified: boolean }[]): void;
  /** Make the provider answer the next authorize with ?error=access_denied. */
  denyNext(): void;
  /** Tamper with the next ID token's claims. */
  tamperNext(fn: (claims: Record<string, unknown>) => void): void;
  settings(names?: string[]): Record<string, unknown>[];
  stop(): Promise<void>;
}

export async function startProvider(): Promise<TestProvider> {
  const server = new OAuth2Server();
  await server.issuer.keys.generate('RS256');
  await server.start(0, '127.0.0.1');
  const issuer = server.issuer.url!.replace(/\/$/, '');
  let user: ProviderUser = { sub: 'nobody' };
  let deny = false;
  let tamper: ((claims: Record<string, unknown>) => void) | undefined;
  server.service.on('beforeTokenSigning', (token: { payload: Record<string, unknown> }) => {
    // Both the access token and the ID token pass here; the ID token is the one with a nonce or aud = client.
    Object.assign(token.payload, { sub: user.sub });
    if (user.email !== undefined) token.payload.email = user.email;
    if (user.email_verified !== undefined) token.payload.email_verified = user.email_verified;
  });
  server.service.on('beforeResponse', () => {});
  server.service.on('beforeAuthorizeRedirect', (redirect: { url: URL }) => {
    if (!deny) return;
    deny = false;
    redirect.url.searchParams.delete('code');
    redirect.url.searchParams.set('error', 'access_denied');
  });
  // ID tokens are signed after beforeTokenSigning; a tamper hook runs last and wins.
  server.service.on('beforeTokenSigning', (token: { payload: Record<string, unknown> }) => {
    if (tamper && 'aud' in token.payload && token.payload.aud === 'basalt-test') {
      tamper(token.payload);
      tamper = undefined;
    }
  });

  // GitHub's OAuth2 endpoints live at fixed paths under its web origin.
  const ghServer = new OAuth2Server(undefined, undefined, {
    endpoints: { authorize: '/login/oauth/authorize', token: '/login/oauth/access_token' },
  });
  await ghServer.issuer.keys.generate('RS256');
  await ghServer.start(0, '127.0.0.1');
  const githubOrigin = ghServer.issuer.url!.replace(/\/$/, '');
  let gh: { id: number; emails: { email: string; primary: boolean; verified: boolean }[] } = { id: 0, emails: [] };
  const api = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch(req) {
      if (!req.headers.get('authorization')?.startsWith('Bearer ')) return new Response('no token', { status: 401 });
      const path = new URL(req.url).pathname;
      if (path === '/user') return Response.json({ id: gh.id, login: `user${gh.id}` });
      if (path === '/user/emails') return Response.json(gh.emails);
      return new Response('not found', { status: 404 });
    },
  });
  return {
    issuer,
    githubOrigin,
    apiUrl: `http://127.0.0.1:${api.port}`,
    as: (u) => {
      user = u;
    },
    github: (id, emails) => {
      gh = { id, emails };
    },
    denyNext: () => {
      deny = true;
    },
    tamperNext: (fn) => {
      tamper = fn;
    },
    settings(names = ['test']) {
      return names.map((name) =>
        name === 'github'
          ? {
              name,
              kind: 'github',
              issuer: githubOrigin,
              api_url: `http://127.0.0.1:${api.port}`,
              client_id: 'basalt-gh',
              client_secret: 'gh-secret',
            }
          : { name, issuer, client_id: 'basalt-test', client_secret: 'test-secret' },
      );
    },
    async stop() {
      api.stop(true);
      await server.stop();
      await ghServer.stop();
    },
  };
}

export interface Hop {
  status: number;
  location: string;
  setCookie: string | null;
  /** Every Set-Cookie header, whole. */
  setCookies: string[];
  headers: Headers;
}

/** One request (GET unless `method`) without following redirects. */
export async function hop(
  url: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<Hop & { body: string }> {
  const r = await fetch(url, { redirect: 'manual', headers, method });
  return {
    status: r.status,
    location: r.headers.get('location') ?? '',
    setCookie: r.headers.get('set-cookie'),
    setCookies: r.headers.getSetCookie(),
    headers: r.headers,
    body: await r.text(),
  };
}

/** The `name=value` of a Set-Cookie header. */
export const cookieOf = (setCookie: string | null) => (setCookie ?? '').split(';')[0]!;

/** The fragment parameters of a URL (`#code=…`). */
export const fragment = (url: string) => new URLSearchParams(new URL(url).hash.slice(1));

export interface Walk {
  start: Hop;
  /** The provider's redirect back to the callback (its URL carries code and state). */
  toCallback: string;
  cookie: string;
  /** The callback's 302 target. */
  final: Hop & { body: string };
}

/**
 * Start → provider → callback, as a browser (`s`: a test server or the base URL of one,
 * e.g. the executable's): returns every step. `cookie` overrides the
 * cookie the callback gets (another browser: '').
 */
export async function walk(
  s: TestServer | string,
  name: string,
  redirectTo: string,
  opts: { cookie?: string; link?: string; ip?: string } = {},
): Promise<Walk> {
  const q = new URLSearchParams({ redirect_to: redirectTo });
  if (opts.link) q.set('link', opts.link);
  const headers = { 'x-forwarded-for': opts.ip ?? '203.0.113.7' };
  const base = typeof s === 'string' ? s : s.publicUrl;
  const start = await hop(`${base}/api/v1/auth/oauth/${name}/start?${q}`, headers);
  if (start.status !== 302) throw new Error(`start answered ${start.status}: ${(start as { body?: string }).body}`);
  const atProvider = await hop(start.location);
  const cookie = opts.cookie ?? start.setCookies.map(cookieOf).join('; ');
  const final = await hop(atProvider.location, { ...headers, ...(cookie ? { cookie } : {}) });
  return { start, toCallback: atProvider.location, cookie, final };
}

/**
 * The linking callback's confirmation page of `w` answered as the browser would: its
 * button (`decline`: the Cancel one) posted back with the walk's cookies (or `cookie`).
 */
export async function confirmLink(
  w: Walk,
  opts: { decline?: boolean; cookie?: string } = {},
): Promise<Hop & { body: string }> {
  if (w.final.status !== 200) throw new Error(`no confirmation page: ${w.final.status} ${w.final.location}`);
  const actions = [...w.final.body.matchAll(/<form method="post" action="([^"]+)"/g)].map((m) =>
    m[1]!.replaceAll('&#38;', '&'),
  );
  const action = actions.find((a) => a.includes('decline') === !!opts.decline)!;
  const cookie = opts.cookie ?? w.cookie;
  return hop(new URL(action, w.toCallback).href, cookie ? { cookie } : {}, 'POST');
}

/** The claims of an access token (not verified: the server did that). */
export function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
}
