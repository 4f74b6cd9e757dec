import { Elysia } from 'elysia';
import type { AnyElysia } from 'elysia';
import bundlePath from 'swagger-ui-dist/swagger-ui-bundle.js' with { type: 'file' };
import cssPath from 'swagger-ui-dist/swagger-ui.css' with { type: 'file' };
import { buildOpenApi } from './document';
import type { Areas } from '../../http/areas';

const page = (docs: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Basalt API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${docs}/assets/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="${docs}/assets/swagger-ui-bundle.js"></script>
<script src="${docs}/assets/init.js"></script>
</body></html>`;

// Follows the system's colour scheme with Swagger UI's own dark styles (html.dark-mode), as the panel does.
const init = (spec: string) =>
  `window.ui = SwaggerUIBundle({ url: '${spec}', dom_id: '#ui', deepLinking: true, validatorUrl: null });
const dark = matchMedia('(prefers-color-scheme: dark)');
const scheme = () => {
  document.documentElement.classList.toggle('dark-mode', dark.matches);
  document.documentElement.style.colorScheme = dark.matches ? 'dark' : 'light';
  document.body.style.background = dark.matches ? '#1c1c21' : '';
};
scheme();
dark.addEventListener('change', scheme);`;

/**
 * The document's bytes, built once from the listeners' route list. Call it after every
 * route is mounted and before the first request: Elysia adds keywords to a route's
 * schemas when it compiles its validators on that route's first request, so building
 * later would make the document depend on the traffic seen (docs/operations.md
 * "The OpenAPI document").
 */
export function openapiDocument(apps: AnyElysia[], version: string, areas: Areas): string {
  return JSON.stringify(buildOpenApi(apps, version, areas));
}

/**
 * The document at the openapi area's root (`/api/openapi.json`, the `document` built at
 * start, served as is) and the interactive reference at the docs area's (`/api/docs`),
 * whose assets are embedded in the executable (no CDN); roots from src/app.ts.
 */
export function openapiRoutes(document: string, withDocs: boolean, at: { spec: string; docs: string }) {
  const { spec, docs } = at;
  const PAGE = page(docs);
  const INIT = init(spec);
  const app = new Elysia({ name: `basalt.openapi.${withDocs ? 'docs' : 'spec'}` }).get(
    spec,
    () => new Response(document, { headers: { 'content-type': 'application/json' } }),
    { detail: { hide: true } },
  );
  if (!withDocs) return app;
  const asset = (path: string, type: string) => () =>
    new Response(Bun.file(path), { headers: { 'content-type': type, 'cache-control': 'public, max-age=86400' } });
  return app
    .get(docs, () => new Response(PAGE, { headers: { 'content-type': 'text/html; charset=utf-8' } }), {
      detail: { hide: true },
    })
    .get(`${docs}/assets/swagger-ui-bundle.js`, asset(bundlePath, 'text/javascript; charset=utf-8'), {
      detail: { hide: true },
    })
    .get(`${docs}/assets/swagger-ui.css`, asset(cssPath, 'text/css; charset=utf-8'), { detail: { hide: true } })
    .get(
      `${docs}/assets/init.js`,
      () => new Response(INIT, { headers: { 'content-type': 'text/javascript; charset=utf-8' } }),
      { detail: { hide: true } },
    );
}
