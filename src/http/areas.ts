/**
 * What an area of the HTTP surface is: a root path and everything below it, with the
 * facts the layers around its routes act on. The areas themselves are listed once, in
 * the route list of src/app.ts; the listener (src/http/server.ts), the envelopes
 * (src/http/envelope.ts), the metrics, the extension loader and the OpenAPI document
 * read them from there (README.md, What it serves).
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
