/**
 * Security headers by area (docs/operations.md, Security headers; the area's `csp` and
 * `noStore` in src/app.ts). The listener adds each one a response does not carry already
 * (the admin panel and file downloads bring their own policies, and an extension serving
 * a page may set its own CSP). The envelope renderers (src/http/envelope.ts) build their
 * answers with the whole set and the request id (`jsonAnswer`), so the listener has nothing
 * left to add to most answers.
 */
import type { AreaFacts } from './areas';

const API_CSP = "default-src 'none'; frame-ancestors 'none'";
/** The reference page: its own scripts, styles and the document, nothing from elsewhere. */
const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

type HeaderList = readonly (readonly [name: string, value: string])[];
const byArea = new WeakMap<AreaFacts, HeaderList>();

/** The security headers of an area's answers (lower-case names), worked out once per area. */
export function securityHeaders(area: AreaFacts): HeaderList {
  let list = byArea.get(area);
  if (!list) {
    list = Object.freeze([
      ['x-content-type-options', 'nosniff'],
      ['x-frame-options', 'DENY'],
      ['referrer-policy', 'no-referrer'],
      ['content-security-policy', area.csp === 'docs' ? DOCS_CSP : API_CSP],
      ...(area.noStore ? ([['cache-control', 'no-store']] as const) : []),
    ] as const);
    byArea.set(area, list);
  }
  return list;
}

/** Adds each of the area's security headers that `headers` does not carry yet. */
export function secure(headers: Headers, area: AreaFacts): void {
  for (const [name, value] of securityHeaders(area)) if (!headers.has(name)) headers.set(name, value);
}

/**
 * The mark `jsonAnswer` leaves on its responses: a property under a symbol of this module,
 * which nothing else can name. A WeakSet did the same with a weak entry per request, extra
 * work for every collection (as the request facts' WeakMap was: src/http/request-info.ts).
 */
const STAMPED = Symbol('basalt.stamped');
type Stampable = Response & { [STAMPED]?: true };

/**
 * A response built by `jsonAnswer`, with its area's security headers and the request id:
 * the listener leaves its headers as they are.
 */
export function stamped(res: Response): boolean {
  return (res as Stampable)[STAMPED] === true;
}

/** Per area: the security headers and a JSON content type, copied into each answer (one native copy). */
const jsonHeaders = new WeakMap<AreaFacts, Headers>();

/**
 * A JSON body as a response carrying its area's security headers, `X-Request-Id` and
 * `headers` (which replace a security header of the same name), marked so the listener
 * does not set them again one by one (in process, the header set costs about half of
 * setting each header on a finished response).
 */
export function jsonAnswer(
  json: string,
  status: number,
  info: { id: string; area: AreaFacts },
  headers?: Record<string, string>,
): Response {
  let base = jsonHeaders.get(info.area);
  if (!base) {
    base = new Headers({ 'content-type': 'application/json' });
    for (const [name, value] of securityHeaders(info.area)) base.set(name, value);
    jsonHeaders.set(info.area, base);
  }
  const res = new Response(json, { status, headers: base });
  const h = res.headers;
  h.set('X-Request-Id', info.id);
  if (headers) for (const [name, value] of Object.entries(headers)) h.set(name, value);
  (res as Stampable)[STAMPED] = true;
  return res;
}
