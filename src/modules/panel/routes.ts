/**
 * The administration panel on the main listener (docs/admin.md): `/_/` is
 * the page (no-cache, revalidated by ETag), `/_/assets/*` its content-hashed files
 * (cached for a year), `/` redirects to `/_/`. Every answer carries the panel's own
 * strict CSP; gzip when the client takes it, compressed once.
 */
import { rootOf, type AreaFacts } from '../../http/areas';
import { Elysia } from 'elysia';
import type { Platform } from '../../platform';
import { panelSource, sendFile } from './assets';

/**
 * No inline script and nothing from another host. `style-src` allows inline styles
 * only because a mail preview (`<iframe sandbox srcdoc>`, scripts off, opaque origin)
 * inherits this policy and mail HTML carries its styles inline; the panel itself uses
 * none. Images in a preview may be `data:` only: a preview never calls another host.
 */
export const PANEL_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "frame-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "object-src 'none'",
].join('; ');

const SECURITY = {
  'content-security-policy': PANEL_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
};

const IMMUTABLE = 'public, max-age=31536000, immutable';

function notFound(): Response {
  return new Response('Not found', {
    status: 404,
    headers: { ...SECURITY, 'content-type': 'text/plain; charset=utf-8' },
  });
}

export function panelRoutes(_p: Platform, area: AreaFacts) {
  const root = rootOf(area);
  const assets = panelSource();
  const redirect = () => new Response(null, { status: 302, headers: { location: `${root}/`, ...SECURITY } });
  const hide = { detail: { hide: true } };
  return (
    new Elysia({ name: 'basalt.panel' })
      .get('/', redirect, hide)
      // Elysia matches `/_` and `/_/` alike: the page is served only at `/_/`.
      .get(
        `${root}/`,
        async ({ request }) =>
          request.url.endsWith(root)
            ? redirect()
            : sendFile(request, (await assets()).index, { ...SECURITY, 'cache-control': 'no-cache' }),
        hide,
      )
      .get(
        `${root}/assets/:file`,
        async ({ request, params }) => {
          const file = (await assets()).files.get(params.file);
          return file ? sendFile(request, file, { ...SECURITY, 'cache-control': IMMUTABLE }) : notFound();
        },
        hide,
      )
  );
}
