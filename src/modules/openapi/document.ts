/**
 * The OpenAPI 3.1 document of every public route (docs/operations.md "The OpenAPI
 * document"). Built once, at start, from the route list of the listeners' apps before
 * any request is served: Elysia compiles a route's validators on its first request and
 * adds keywords to the schemas as it does, so a document built later would depend on
 * the traffic seen. Built from the same TypeBox schemas that validate, plus what the
 * layers around the routes answer for every route of an area, as its entry in the route
 * list says (src/app.ts: body policy → 413/415, envelope, access-mode key), so each
 * operation lists every status it can answer, in its area's envelope. The areas with an
 * `openapi` entry are documented; the others (admin, panel, system) are not.
 */
import type { AnyElysia } from 'elysia';
import { prefixesOf, type AreaFacts, type Areas } from '../../http/areas';
import { SchemaConverter, isOptional, type Schema } from './schema';
import { ErrorA, ErrorB, ErrorC } from '../../http/envelope-schemas';
import { headerComponents } from './headers';

type Envelope = AreaFacts['envelope'];

/** Security alternatives as OpenAPI lists them: each names the schemes it needs (`{}`: none). */
type Security = Record<string, string[]>;

/** A response of an operation. */
interface ResponseObject {
  description?: string;
  headers?: Record<string, unknown>;
  content?: Record<string, unknown>;
  [field: string]: unknown;
}

/** The OpenAPI fields of an operation this builder reads or writes (any other is passed through). */
interface OperationFields {
  summary?: string;
  tags?: string[];
  parameters?: unknown[];
  requestBody?: unknown;
  responses?: Record<string, ResponseObject>;
  security?: Security[];
  [field: string]: unknown;
}

/** A route's `detail`: its operation's OpenAPI fields as given, and this platform's own. */
interface Detail extends OperationFields {
  hide?: boolean;
  operationId?: string;
  /** Elysia answers HEAD through this GET handler. */
  'x-head'?: boolean;
  /** Error codes by status, besides those of the layers around the route. */
  'x-codes'?: Record<string, string[]>;
  [field: string]: unknown;
}

/** What the document reads of a route's hooks (its Elysia options). */
interface Hooks {
  detail?: Detail;
  params?: unknown;
  query?: unknown;
  body?: unknown;
  response?: unknown;
}

interface Operation extends OperationFields {
  operationId: string;
}

const ERROR_REF: Record<Envelope, string> = { A: 'ErrorA', B: 'ErrorB', C: 'ErrorC' };

const STATUS_TEXT: Record<string, string> = {
  '400': 'Bad request',
  '401': 'Not authenticated',
  '403': 'Forbidden',
  '404': 'Not found',
  '409': 'Conflict',
  '413': 'Request body too large',
  '415': 'Unsupported media type',
  '416': 'Range not satisfiable',
  '422': 'Request body failed validation',
  '429': 'Too many requests; wait `Retry-After` seconds',
  '500': 'Internal error; the X-Request-Id identifies it in the server log',
  '502': 'The mail provider refused the message',
  '503': 'A dependency is unavailable or busy; retry shortly (after `Retry-After` seconds when given)',
};

/** Error codes the layers around a route answer with, per status (added to each status's description). */
function layerCodes(area: AreaFacts, hasBody: boolean, validationStatus: number): Record<string, string[]> {
  // Any route may wait for the database: bounded by database.busy_timeout_ms (src/db/wait-gate.ts);
  // and during a takeover, for the new process: bounded by web.takeover_wait_ms (src/handover.ts).
  const codes: Record<string, string[]> = {
    '500': ['internal_error'],
    '503': ['database_unavailable', 'database_busy', 'disk_full', 'restarting'],
  };
  const add = (status: number, code: string) => (codes[status] ??= []).push(code);
  if (hasBody && area.body === 'json') {
    add(400, 'invalid_json');
    add(415, 'unsupported_media_type');
  } else if (hasBody && area.body === 'capped') add(400, 'invalid_json');
  if (hasBody) add(validationStatus, 'validation_error');
  // Capped at web.max_json_body_bytes by the listener, or at files.max_bytes by the Files module (streamed).
  if (hasBody) add(413, 'payload_too_large');
  if (area.gated) {
    add(401, 'api_key_required');
    add(401, 'unauthorized');
  }
  return codes;
}

/** `getApiV1FilesByIdContent`-style ids, camelCase without the `/api/v1` or `/api` prefix: `getFilesByIdContent`. */
function operationId(method: string, path: string): string {
  const words = path
    .replace(/^\/api\/(v1\/)?/, '')
    .split('/')
    .filter(Boolean)
    .flatMap((seg) =>
      seg.startsWith(':') || seg.startsWith('{')
        ? ['by', ...seg.replace(/[:{}]/g, '').split(/[-_]/)]
        : seg.split(/[-_.]/),
    );
  return method.toLowerCase() + words.map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('');
}

/** `/api/v1/files/:id` → `/api/v1/files/{id}`. */
function openapiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/**
 * Security alternatives as enforced: on a public prefix every alternative may also carry
 * the access-mode key (required in `api_key_required` mode), and a route that declares
 * none is open (`{}`) apart from that key.
 */
function securityOf(declared: Security[] | undefined, gated: boolean): Security[] {
  const alts = declared?.length ? declared : [{}];
  if (!gated) return alts;
  const out: Security[] = [];
  const seen = new Set<string>();
  const push = (a: Security) => {
    const k = JSON.stringify(Object.keys(a).sort());
    if (!seen.has(k)) {
      seen.add(k);
      out.push(a);
    }
  };
  for (const a of alts) push(a);
  for (const a of alts) if (!('ApiKey' in a)) push({ ...a, ApiKey: [] });
  return out;
}

/** `/api/v1/auth, /api/v1/db and /api/module`: the gated areas' roots, in words. */
function gatedPrefixes(areas: Areas): string {
  const roots = areas.list.filter((a) => a.gated).flatMap(prefixesOf);
  return roots.length > 1 ? `${roots.slice(0, -1).join(', ')} and ${roots.at(-1)}` : roots.join('');
}

const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

/**
 * An operation's tag, from its area (so route files name none): the area's own in the route
 * list (src/app.ts), or on the extensions' module routes the extension's name
 * (`/api/module/<name>/…`). A route's `detail.tags` still wins.
 */
function tagsOf(area: AreaFacts, path: string): string[] {
  if (area.openapi?.tag) return [area.openapi.tag.name];
  const name = path.slice(prefixesOf(area)[0]!.length + 1).split('/')[0];
  return name ? [name] : [];
}

export interface RouteInfo {
  method: string;
  path: string;
  hooks: Hooks;
}

/** The routes of the documented areas (both listeners when split), each once. */
export function publicRoutes(apps: AnyElysia[], areas: Areas): RouteInfo[] {
  const seen = new Set<string>();
  const out: RouteInfo[] = [];
  for (const app of apps) {
    for (const r of app.routes) {
      const key = `${r.method} ${r.path}`;
      if (seen.has(key) || !areas.of(r.path).openapi || r.hooks?.detail?.hide || r.method === 'OPTIONS') continue;
      seen.add(key);
      out.push(r);
    }
  }
  return out;
}

export function buildOpenApi(apps: AnyElysia[], version: string, areas: Areas): Record<string, unknown> {
  const conv = new SchemaConverter();
  // The envelopes first, so they keep their names.
  for (const s of [ErrorA, ErrorB, ErrorC]) conv.convert(s);
  const paths: Record<string, Record<string, Operation>> = {};
  // The areas' tags in route-list order, then one per extension whose module routes are documented.
  const tags: { name: string; description: string }[] = areas.list.flatMap((a) =>
    a.openapi?.tag ? [{ ...a.openapi.tag }] : [],
  );
  for (const route of publicRoutes(apps, areas)) {
    const area = areas.of(route.path);
    const method = route.method.toLowerCase();
    const op = operation(conv, route, area);
    for (const tag of op.tags ?? [])
      if (!tags.some((t) => t.name === tag))
        tags.push({ name: tag, description: `Routes of the ${tag} extension (format B).` });
    const path = openapiPath(route.path);
    const ops = (paths[path] ??= {});
    ops[method] = op;
    // Elysia answers HEAD through a GET handler that opts in (`detail['x-head']`): same status and headers, no body.
    if (method === 'get' && route.hooks?.detail?.['x-head']) ops.head = headOf(op);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Basalt API',
      version,
      description:
        'Public HTTP API of the Basalt platform: Public Auth, Database API, Mail API, Files (media-library) and extension routes. ' +
        'Every response carries X-Request-Id (echoed when the request sent a valid one; also meta.trace_id in format B). ' +
        'A request whose Host header is missing or malformed is answered 400 `invalid_host` before routing. ' +
        `With web.public_api_access_mode=api_key_required, every route under ${gatedPrefixes(areas)} needs X-API-Key ` +
        '(the site public key will do, except on the Database API which needs a service key): the security alternatives with ApiKey apply then.',
    },
    servers: [
      {
        url: '/',
        description:
          'This instance (with web.public_api_separate, mail and files are on the main listener: see runtime config main_api_base_url).',
      },
    ],
    // A tag no operation carries (Files without the media-library) would be an empty section.
    tags: tags.filter((t) =>
      Object.values(paths).some((ops) =>
        Object.values(ops as Record<string, { tags?: string[] }>).some((op) => op.tags?.includes(t.name)),
      ),
    ),
    paths,
    components: {
      schemas: conv.components,
      headers: headerComponents,
      securitySchemes: {
        ApiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'X-API-Key',
          description: 'pk_… site public key or sk_… service key (docs/api-keys.md).',
        },
        Bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'Access token from POST /api/v1/auth/login (15 minutes).',
        },
      },
    },
  };
}

function operation(conv: SchemaConverter, route: RouteInfo, area: AreaFacts): Operation {
  const hooks = route.hooks ?? {};
  const {
    responses: detailResponses,
    requestBody: detailBody,
    parameters: detailParams,
    security,
    'x-head': _head,
    'x-codes': codes,
    ...detail
  } = hooks.detail ?? {};
  const method = route.method.toLowerCase();
  const op: Operation = {
    operationId: detail.operationId ?? operationId(route.method, route.path),
    tags: tagsOf(area, route.path),
    ...detail,
  };
  op.operationId = op.operationId.replace(/[^A-Za-z0-9]/g, '');

  const parameters: unknown[] = [];
  const params = hooks.params ? conv.convert(hooks.params) : undefined;
  for (const m of route.path.matchAll(/:([A-Za-z0-9_]+)/g)) {
    parameters.push({
      name: m[1],
      in: 'path',
      required: true,
      schema: params?.properties?.[m[1]!] ?? { type: 'string' },
    });
  }
  if (hooks.query) {
    const q = conv.convert(hooks.query);
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      // A lowercase `title` only names the field in 400 messages (src/http/foundation.ts).
      const { description, title, ...rest } = schema;
      if (typeof title === 'string' && /^[A-Z]/.test(title)) rest.title = title;
      parameters.push({
        name,
        in: 'query',
        required: (q.required ?? []).includes(name),
        ...(description ? { description } : {}),
        schema: rest,
      });
    }
  }
  for (const p of detailParams ?? []) parameters.push(p);
  if (parameters.length) op.parameters = parameters;

  let hasBody = false;
  if (detailBody) {
    op.requestBody = detailBody;
    hasBody = true;
  } else if (hooks.body && method !== 'get' && method !== 'head') {
    hasBody = true;
    const schema = conv.convert(hooks.body);
    const types =
      area.body === 'json'
        ? ['application/json']
        : ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'];
    op.requestBody = {
      required: !isOptional(hooks.body),
      content: Object.fromEntries(types.map((t) => [t, { schema }])),
    };
  }

  const validationStatus = area.validationStatus ?? 400;
  const errorCodes = layerCodes(area, hasBody, validationStatus);
  for (const [status, list] of Object.entries(codes ?? {})) (errorCodes[status] ??= []).push(...list);

  const responses: Record<string, ResponseObject> = {};
  // One schema (200), or schemas by status.
  const declared: Record<string, unknown> =
    hooks.response && typeof hooks.response === 'object' && !('type' in hooks.response) && !('anyOf' in hooks.response)
      ? (hooks.response as Record<string, unknown>)
      : hooks.response
        ? { 200: hooks.response }
        : {};
  for (const [status, schema] of Object.entries(declared)) {
    if (Number(status) >= 400) {
      errorCodes[status] ??= [];
      continue;
    }
    const s = conv.convert(schema);
    responses[status] = {
      description:
        (schema as Schema).description ?? (status === '201' ? 'Created' : status === '202' ? 'Accepted' : 'Success'),
      headers: { 'X-Request-Id': header('XRequestId') },
      content: { 'application/json': { schema: s } },
    };
  }
  for (const [status, r] of Object.entries(detailResponses ?? {})) {
    if (Number(status) >= 400) {
      errorCodes[status] ??= [];
      if (r.description) (errorCodes[status] as string[] & { text?: string }).text = r.description;
      continue;
    }
    // Merged with the route's own schema for that status, if any (e.g. headers of a JSON success).
    const base = responses[status] ?? {};
    // Its schemas converted like the route's own: named parts (PascalCase titles) become components.
    const content = r.content
      ? Object.fromEntries(
          Object.entries(r.content).map(([type, media]) => [
            type,
            media && typeof media === 'object' && 'schema' in media
              ? { ...media, schema: conv.convert((media as { schema: unknown }).schema) }
              : media,
          ]),
        )
      : undefined;
    responses[status] = {
      ...base,
      ...r,
      ...(content ? { content } : {}),
      headers: { 'X-Request-Id': header('XRequestId'), ...(base.headers ?? {}), ...(r.headers ?? {}) },
    };
  }
  if (Object.keys(responses).length === 0)
    responses['200'] = { description: 'Success', headers: { 'X-Request-Id': header('XRequestId') } };
  for (const status of Object.keys(errorCodes).sort()) {
    const list = errorCodes[status] as string[] & { text?: string };
    const uniq = [...new Set(list)];
    const text = list.text ?? STATUS_TEXT[status] ?? 'Error';
    const headers: Record<string, unknown> = { 'X-Request-Id': header('XRequestId') };
    if (status === '429') headers['Retry-After'] = { ...header('RetryAfter') };
    // 503 database_busy / restarting: every route may wait for the database or a takeover.
    if (status === '503') headers['Retry-After'] = header('RetryAfterBusy');
    if (status === '416') headers['Content-Range'] = header('ContentRangeUnsatisfied');
    if (status === '401' && security?.some((a) => 'Bearer' in a))
      headers['WWW-Authenticate'] = header('WWWAuthenticate');
    responses[status] = {
      description: `${text}${uniq.length ? ` (codes include: ${uniq.map((c) => '`' + c + '`').join(', ')})` : ''}. Format ${area.envelope} error.`,
      headers,
      content: { 'application/json': { schema: errorSchema(area.envelope, uniq) } },
    };
  }
  op.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
  op.security = securityOf(security, !!area.gated);
  return op;
}

/**
 * The error body of a status: the area's envelope, its `code` narrowed to the codes this route
 * and the layers around it answer with, so a generated client gets a union of literals.
 */
function errorSchema(envelope: Envelope, codes: string[]): Record<string, unknown> {
  const ref = { $ref: `#/components/schemas/${ERROR_REF[envelope]}` };
  if (!codes.length) return ref;
  const code = { type: 'string', enum: codes };
  const narrowed =
    envelope === 'A'
      ? { properties: { error: { properties: { code } } } }
      : envelope === 'B'
        ? { properties: { errors: { items: { properties: { code } } } } }
        : { properties: { code } };
  return { allOf: [ref, narrowed] };
}

/** HEAD: the GET operation's statuses and headers without bodies. */
function headOf(get: Operation): Operation {
  const responses: Record<string, ResponseObject> = {};
  for (const [status, r] of Object.entries(get.responses ?? {})) {
    const { content: _c, ...rest } = r;
    responses[status] = { ...rest, description: `${rest.description} No body (HEAD).` };
  }
  const { requestBody: _b, ...op } = get;
  return {
    ...op,
    operationId: op.operationId.replace(/^get/, 'head'),
    summary: `${get.summary ?? ''} (headers only)`.trim(),
    responses,
  };
}
