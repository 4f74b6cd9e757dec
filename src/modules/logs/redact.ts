/**
 * The path the request log keeps (docs/logs.md): the path and its query string, where the
 * value of every parameter whose name looks like it carries a secret (tokens, codes, keys,
 * passwords, signatures, tickets, state) is replaced by `[redacted]`. Worked out when a batch
 * is written, off the request path.
 */
export const REDACTED = '[redacted]';
/** Parameter names that carry a credential: `access_token`, `code`, `apikey`, `password`, `X-Amz-Signature`, … */
const SECRET_PARAM = /token|code|key|secret|pass|pwd|sig|auth|session|ticket|otp|nonce|state|cred|jwt|hash/i;
/** The longest path kept; a longer one is cut and ends in `…`. */
export const PATH_MAX = 2000;

export function loggedPath(path: string, url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return cut(path);
  let end = url.indexOf('#', q);
  if (end === -1) end = url.length;
  if (end === q + 1) return cut(path);
  const params = url
    .slice(q + 1, end)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      if (eq === -1) return part;
      const raw = part.slice(0, eq);
      let name = raw;
      try {
        name = decodeURIComponent(raw.replace(/\+/g, ' '));
      } catch {}
      return SECRET_PARAM.test(name) ? `${raw}=${REDACTED}` : part;
    });
  return cut(`${path}?${params.join('&')}`);
}

function cut(s: string): string {
  return s.length > PATH_MAX ? `${s.slice(0, PATH_MAX - 1)}…` : s;
}
