/**
 * Where a provider sign-in may send the browser back (`redirect_to`, docs/auth.md, "The flow
 * a front-end runs"): an allow-list of origins or origins with a path, compared parsed
 * (WHATWG). A path that a server behind the front-end could read differently from the
 * parser is refused outright rather than resolved: encoded slashes and backslashes
 * (`/done/..%2fevil` is `/done/` to the parser, `/evil` to a server that decodes first),
 * dot segments, also percent-encoded (`%2e%2e`, even twice), `;` (`/done/..;/evil` is
 * `/evil` to servlet containers), backslashes, spaces and control characters anywhere.
 */

const NOT_ALLOWED = 'must be an absolute http(s) URL allowed by auth.redirect_allowlist';
const PATH_RULES =
  'must not contain encoded slashes or backslashes (%2F, %5C), dot segments (. or .., also percent-encoded) or ; in its path';
/** Decodings tried before a path is called over-encoded: `%25252e` is three. */
const MAX_DECODES = 3;

/**
 * What is wrong with the path as written (before any resolving): each decoding of it is
 * checked in turn, so `%252e%252e` is found as a dot segment.
 */
function pathProblem(path: string): string | undefined {
  let p = path;
  for (let round = 0; ; round++) {
    if (/%(2f|5c)/i.test(p) || p.includes(';') || p.split('/').some((seg) => seg === '.' || seg === '..'))
      return PATH_RULES;
    let next: string;
    try {
      next = decodeURIComponent(p);
    } catch {
      return 'must not have malformed percent-encoding in its path';
    }
    if (next === p) return undefined;
    if (round === MAX_DECODES) return 'must not be percent-encoded over and over in its path';
    p = next;
  }
}

/**
 * Why `target` may not receive the browser, or undefined when it may: an absolute http(s)
 * URL written `scheme://host/path`, without credentials, with a path that passes
 * `pathProblem`, whose origin is an allow-list entry's and, when the entry has a path,
 * whose path is that path or below it (`/auth` admits `/auth` and `/auth/x`, never `/authx`).
 */
export function redirectProblem(allowlist: readonly string[], target: string): string | undefined {
  if (target.length > 2000 || !URL.canParse(target)) return NOT_ALLOWED;
  if (/[\\\s\u0000-\u001f\u007f]/.test(target)) return 'must not contain backslashes, spaces or control characters';
  const raw = /^https?:\/\/[^/?#]*([^?#]*)/i.exec(target);
  const t = new URL(target);
  if (!raw || (t.protocol !== 'https:' && t.protocol !== 'http:') || t.username || t.password) return NOT_ALLOWED;
  const problem = pathProblem(raw[1]!);
  if (problem) return problem;
  const allowed = allowlist.some((entry) => {
    if (!URL.canParse(entry)) return false;
    const e = new URL(entry);
    if (e.origin !== t.origin) return false;
    const prefix = e.pathname;
    if (prefix === '/' || prefix === '') return true;
    const base = prefix.endsWith('/') ? prefix : `${prefix}/`;
    return t.pathname === prefix || t.pathname === base.slice(0, -1) || t.pathname.startsWith(base);
  });
  return allowed ? undefined : NOT_ALLOWED;
}
