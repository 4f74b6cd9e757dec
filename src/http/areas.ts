/**
 * What an area of the HTTP surface is: a root path and everything below it, with the
 * facts the layers around its routes act on. Each area's facts are declared once, in
 * `AREA` below; the route list of src/app.ts gives each its routes, and the listener
 * (src/http/server.ts), the envelopes (src/http/envelope.ts), the metrics, the extension
 * loader and the OpenAPI document read them from there (README.md, What it serves). A
 * model file names its area, never an envelope letter: `successOf(AREA.auth)` and
 * `errorsOf(area)` (src/http/envelope-schemas.ts) give the schemas of the area's envelope.
 */
import type { Format } from './envelope-schemas';

export type Listener = 'main' | 'public';

/**
 * What the listener does with a request body before the area sees it:
 * - `json`: JSON only (415 `unsupported_media_type` for any other type on POST/PUT/PATCH/DELETE),
 *   capped at web.max_json_body_bytes and bounded by web.max_json_depth / web.max_json_items;
 * - `capped`: any type, capped at web.max_json_body_bytes; a JSON body is bounded as above;
 * - `streamed`: handed on unread; the area counts the bytes itself (the Files module, files.max_bytes).
 */
export type BodyPolicy = 'json' | 'capped' | 'streamed';

export interface AreaFacts {
  /** Short name: the `area` label of the request metrics (docs/operations.md, Metrics). */
  name: string;
  /** The root path (no trailing slash); a path equal to it or below it belongs to the area. Some areas answer at several roots. */
  prefix: string | readonly string[];
  /** The listener serving it when web.public_api_separate is on; `both` for the OpenAPI document and its reference page. */
  listener: Listener | 'both';
  envelope: Format;
  body: BodyPolicy;
  /** A public prefix: web.public_api_access_mode=api_key_required needs X-API-Key (docs/api-keys.md). */
  gated?: boolean;
  /** Answers carry tokens, secrets or private rows: `Cache-Control: no-store` unless the route sets its own. */
  noStore?: boolean;
  /** The Content-Security-Policy set when a response brings none (docs/operations.md, Security headers). */
  csp?: 'api' | 'docs';
  /** Status of a request that fails its schema: 422 on Public Auth (docs/auth.md), 400 elsewhere. */
  validationStatus?: 400 | 422;
  /** In the OpenAPI document, under this tag (the module area's operations carry their extension's tag). */
  openapi?: { tag?: { name: string; description: string } };
  /** The routes come from the one extension that claims the prefix (docs/extensions.md, `ctx.claim`). */
  claimable?: boolean;
}

/** The facts the public JSON APIs share: public listener, format A, JSON bodies, the access mode's gate, never cached. */
const PUBLIC_JSON_API = { listener: 'public', envelope: 'A', body: 'json', gated: true, noStore: true } as const;

/** Every area's facts, by name, in the route list's order (src/app.ts). */
export const AREA = {
  system: {
    name: 'system',
    prefix: ['/healthz', '/readyz', '/metrics'],
    listener: 'main',
    envelope: 'A',
    body: 'capped',
  },
  auth: {
    name: 'auth',
    prefix: '/api/v1/auth',
    ...PUBLIC_JSON_API,
    validationStatus: 422,
    openapi: {
      tag: { name: 'Public Auth', description: 'Site users: registration, login, tokens (format A envelopes).' },
    },
  },
  db: {
    name: 'db',
    prefix: '/api/v1/db',
    ...PUBLIC_JSON_API,
    openapi: {
      tag: {
        name: 'Database',
        description: 'Parameterized CRUD over whitelisted tables, with transactions (format A).',
      },
    },
  },
  realtime: {
    name: 'realtime',
    prefix: '/api/v1/realtime',
    ...PUBLIC_JSON_API,
    openapi: {
      tag: {
        name: 'Realtime',
        description: 'Row changes and extension messages as server-sent events, resumable (format A errors).',
      },
    },
  },
  mail: {
    name: 'mail',
    prefix: '/api/v1/mail',
    listener: 'main',
    envelope: 'B',
    body: 'json',
    openapi: { tag: { name: 'Mail', description: 'Sending e-mail, sync or queued, idempotent (format B).' } },
  },
  files: {
    name: 'files',
    prefix: '/api/v1/files',
    listener: 'main',
    envelope: 'C',
    body: 'streamed',
    claimable: true,
    openapi: { tag: { name: 'Files', description: 'media-library module (format C).' } },
  },
  runtime_config: {
    name: 'runtime_config',
    prefix: '/api/v1/public',
    listener: 'public',
    envelope: 'A',
    body: 'capped',
    gated: true,
    openapi: { tag: { name: 'Runtime config', description: 'Public front-end parameters (format A).' } },
  },
  /** The JS client (docs/client.md): its module and declarations, for any page to import; never gated. */
  client: {
    name: 'client',
    prefix: ['/api/client.js', '/api/client.d.ts'],
    listener: 'public',
    envelope: 'A',
    body: 'capped',
  },
  module: {
    name: 'module',
    prefix: '/api/module',
    listener: 'public',
    envelope: 'B',
    body: 'capped',
    gated: true,
    openapi: {},
  },
  admin: { name: 'admin', prefix: '/api/admin', listener: 'main', envelope: 'A', body: 'json', noStore: true },
  panel: { name: 'panel', prefix: '/_', listener: 'main', envelope: 'A', body: 'capped' },
  openapi: { name: 'openapi', prefix: '/api/openapi.json', listener: 'both', envelope: 'A', body: 'capped' },
  docs: { name: 'docs', prefix: '/api/docs', listener: 'both', envelope: 'A', body: 'capped', csp: 'docs' },
} as const satisfies Record<string, AreaFacts>;

/** A path in no area (an unknown root): envelope A, answered by both listeners (404). */
export const NO_AREA: AreaFacts = {
  name: 'other',
  prefix: [],
  listener: 'both',
  envelope: 'A',
  body: 'capped',
  csp: 'api',
};

export function prefixesOf(area: AreaFacts): readonly string[] {
  return typeof area.prefix === 'string' ? [area.prefix] : area.prefix;
}

/** The area's one root, the prefix its routes mount under (an area with several roots mounts its routes as they are). */
export function rootOf(area: AreaFacts): string {
  const roots = prefixesOf(area);
  if (roots.length !== 1)
    throw new Error(`area '${area.name}' has ${roots.length} roots; its routes carry their own paths`);
  return roots[0]!;
}

/** `path` is `root` or below it. */
export function under(path: string, root: string): boolean {
  return (
    path.startsWith(root) &&
    (path.length === root.length || path.charCodeAt(root.length) === 47 /* / */ || root.endsWith('/'))
  );
}

/** The areas of one route list, looked up by path (the longest matching root wins). */
export class Areas {
  private readonly roots: { root: string; area: AreaFacts }[];

  constructor(readonly list: readonly AreaFacts[]) {
    this.roots = list
      .flatMap((area) => prefixesOf(area).map((root) => ({ root, area })))
      .sort((a, b) => b.root.length - a.root.length);
  }

  /** The area `path` belongs to, or NO_AREA. */
  of(path: string): AreaFacts {
    for (const r of this.roots) if (under(path, r.root)) return r.area;
    return NO_AREA;
  }

  byName(name: string): AreaFacts {
    const a = this.list.find((x) => x.name === name);
    if (!a) throw new Error(`no area named '${name}' in the route list (src/app.ts)`);
    return a;
  }
}
