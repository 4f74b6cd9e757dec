import type { Server } from 'bun';
import { AppError, Errors } from './errors';
import { errorResponse, hostProblem, pathOf } from './envelope';
import { secure, stamped } from './security-headers';
import type { AreaFacts, Areas } from './areas';
import {
  cameOverHttps,
  clientIp,
  setRequestInfo,
  type RequestFailure,
  type RequestInfo,
  type RequestLogSink,
} from './request-info';
import { answerError, toAppError } from './foundation';
import type { Settings } from '../config/settings';
import type { Logger } from '../log';
import type { Metrics } from './metrics';
import { isJsonType, jsonShapeProblem, type JsonBounds } from './json-bounds';
import { interactive } from '../db/interactive';

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const EXPOSED =
  'X-Request-Id, Retry-After, Idempotent-Replayed, ETag, Content-Range, Accept-Ranges, Content-Disposition';
export interface HandlerDeps {
  settings: Settings;
  log: Logger;
  /** The route list's areas (src/app.ts): body policy, envelope, headers and metrics label by path. */
  areas: Areas;
  /** Elysia's `handle`: every request goes through the app (src/app.ts). */
  handle: (req: Request) => Promise<Response>;
  metrics?: Metrics;
  /** The request log (docs/logs.md): takes note of every answered request. */
  requestLog?: RequestLogSink;
}

export type Handler = (req: Request, server?: Server<unknown>) => Promise<Response>;

/**
 * The listener's fetch: request id, CORS, body limits and content type, request
 * log. Everything here answers in the area's envelope, like the app does.
 */
export function createHandler({ settings, log, areas, handle, metrics, requestLog }: HandlerDeps): Handler {
  // The last path's area: nearly every request under load repeats a path, and comparing it
  // costs less than walking the route list's roots (areas are fixed for the handler's life).
  let lastPath = '';
  let lastArea = areas.of(lastPath);
  const refusedOrigins = new RefusedOrigins(log);
  return async (req, server) => {
    const start = performance.now();
    const incoming = req.headers.get('x-request-id');
    const id = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    // Each read of `url` and `method` makes a new string: read once.
    const url = req.url;
    const method = req.method;
    const path = pathOf(url);
    if (path !== lastPath) {
      lastArea = areas.of(path);
      lastPath = path;
    }
    const area = lastArea;
    const info = new ListenerInfo(id, start, area, req, server, settings);
    const origin = req.headers.get('origin');
    const corsOk = !!origin && settings.get('web.cors_origins').includes(origin);

    let res: Response;
    try {
      // Routing needs a proper URL: with an empty or garbled Host the path is not where the router looks.
      if (hostProblem(url)) throw Errors.invalidHost();
      if (method === 'OPTIONS' && req.headers.has('access-control-request-method')) {
        res = new Response(null, { status: 204 });
        if (origin && !corsOk) refusedOrigins.seen(origin);
        if (corsOk) {
          res.headers.set('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE, OPTIONS');
          res.headers.set(
            'Access-Control-Allow-Headers',
            req.headers.get('access-control-request-headers') ?? 'Content-Type, Authorization, X-API-Key',
          );
          res.headers.set('Access-Control-Max-Age', '600');
        }
      } else {
        const pending = checkBody(req, method, area, settings);
        // A JSON body with a length is read here, in this function (one await, no function of
        // its own around it); a chunked one by readCapped. Awaiting a plain value would still cost a turn.
        const checked =
          pending instanceof Request
            ? pending
            : pending === READ_JSON
              ? bounded(req, await req.text(), boundsOf(settings))
              : await pending;
        setRequestInfo(checked, info);
        // Interactive work: it may ask an idle API transaction to yield the database (src/db/wait-gate.ts).
        res = await interactive(() => handle(checked));
      }
    } catch (err) {
      const appErr = err instanceof AppError ? err : toAppError(err, area);
      answerError(log, info, appErr, err, path);
      res = errorResponse(appErr, info);
    }

    // The envelope renderers' answers carry the request id and security headers already.
    if (!stamped(res)) {
      try {
        res.headers.set('X-Request-Id', id);
      } catch {
        res = new Response(res.body, res); // immutable headers (e.g. a proxied response)
        res.headers.set('X-Request-Id', id);
      }
      secure(res.headers, area);
    }
    if (corsOk) {
      res.headers.set('Access-Control-Allow-Origin', origin!);
      res.headers.set('Access-Control-Allow-Credentials', 'true');
      res.headers.set('Access-Control-Expose-Headers', EXPOSED);
    }
    if (origin) res.headers.append('Vary', 'Origin');
    const ms = Math.round((performance.now() - start) * 10) / 10;
    metrics?.observe(area.name, method, res.status, ms);
    requestLog?.record(method, url, path, res.status, ms, info);
    if (log.enabled('info')) log.info('request', { request_id: id, method, path, status: res.status, ms, ip: info.ip });
    return res;
  };
}

/**
 * Preflights from origins outside `web.cors_origins`: the browser refuses the page's request
 * with nothing in the server's log, so the operator is told, naming the setting, at most once
 * a minute per origin (and for at most MAX_ORIGINS origins a minute: a flood of made-up
 * origins writes little).
 */
class RefusedOrigins {
  private static readonly MAX_ORIGINS = 100;
  private static readonly EVERY_MS = 60_000;
  private readonly logged = new Set<string>();
  private since = 0;

  constructor(private readonly log: Logger) {}

  seen(origin: string): void {
    const now = Date.now();
    if (now - this.since >= RefusedOrigins.EVERY_MS) {
      this.logged.clear();
      this.since = now;
    }
    if (this.logged.has(origin) || this.logged.size >= RefusedOrigins.MAX_ORIGINS) return;
    this.logged.add(origin);
    this.log.warn('CORS preflight refused: origin not in web.cors_origins', {
      origin: origin.slice(0, 200),
      setting: 'web.cors_origins',
      hint: 'add the page origin (scheme://host:port) to web.cors_origins to let it call the API',
    });
  }
}

/**
 * What the listener establishes about a request (src/http/request-info.ts). The client
 * address is worked out when first asked for (rate limits, the request log line): asking
 * the socket for its peer costs more than the rest of the wrapper. A class, so a request
 * allocates one object rather than an object, its accessors and their closures.
 */
class ListenerInfo implements RequestInfo {
  private address?: string = undefined;
  keyId?: string = undefined;
  userId?: string = undefined;
  failure?: RequestFailure = undefined;

  constructor(
    readonly id: string,
    readonly start: number,
    readonly area: AreaFacts,
    private readonly req: Request,
    private readonly server: Server<unknown> | undefined,
    private readonly settings: Settings,
  ) {}

  get ip(): string {
    return (this.address ??= clientIp(this.peer(), this.req.headers.get('x-forwarded-for'), this.trusted()));
  }

  /** The request reached us over HTTPS, directly or per X-Forwarded-Proto from a trusted proxy (admin cookies). */
  get https(): boolean {
    return cameOverHttps(this.req, this.peer(), this.trusted());
  }

  private peer(): string {
    return this.server?.requestIP(this.req)?.address ?? '127.0.0.1';
  }

  private trusted(): string[] {
    return this.settings.get('web.trusted_proxies');
  }
}

/** checkBody's answer for a JSON body with an acceptable Content-Length: read it and bound its shape (`bounded`). */
const READ_JSON = Symbol('basalt.readJson');

function boundsOf(settings: Settings): JsonBounds {
  return { maxDepth: settings.get('web.max_json_depth'), maxItems: settings.get('web.max_json_items') };
}

/**
 * The request to hand on, or a 413/415 thrown. Synchronous unless the body is chunked
 * (no Content-Length) and must be read here to be counted; READ_JSON when the caller is to
 * read a JSON body (with a Content-Length within the limit) and bound it.
 */
function checkBody(
  req: Request,
  method: string,
  area: AreaFacts,
  settings: Settings,
): Request | Promise<Request> | typeof READ_JSON {
  if (area.body === 'streamed') return req;
  const length = req.headers.get('content-length');
  // `req.body` is only touched without a Content-Length: reading it makes a stream.
  const chunked = !length && req.body !== null;
  if (length === '0' || (!length && !chunked)) return req;
  const limit = settings.get('web.max_json_body_bytes');
  const json = isJsonType(req.headers.get('content-type'));
  if (!json && area.body === 'json' && BODY_METHODS.has(method)) throw Errors.unsupportedMediaType();
  if (length && Number(length) > limit) throw Errors.payloadTooLarge(limit);
  if (chunked) return readCapped(req, limit, json ? boundsOf(settings) : undefined);
  return json ? READ_JSON : req;
}

/**
 * A JSON body's text checked against web.max_json_depth and web.max_json_items before
 * anything parses it (src/http/json-bounds.ts), then handed on (`withBody`).
 */
function bounded(req: Request, text: string, bounds: JsonBounds): Request {
  const problem = jsonShapeProblem(text, bounds);
  if (problem) throw Errors.jsonTooComplex(problem);
  return withBody(req, text);
}

/**
 * The request to hand on once the listener has read its body: the same method, headers and
 * signal (work for a client that has gone is dropped, src/db/wait-gate.ts), with the bytes
 * read as its body. Elysia's parser, a route's parse hook and an extension handler read it
 * with the request's own readers (`json()`, `text()`, `arrayBuffer()`, a stream…:
 * docs/extensions.md); nothing here stands in for them.
 */
function withBody(req: Request, body: BodyInit): Request {
  return new Request(req, { body, signal: req.signal });
}

async function readCapped(req: Request, limit: number, bounds?: JsonBounds): Promise<Request> {
  // No Content-Length: read at most limit+1 bytes rather than trusting the stream.
  const reader = req.body!.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {}); // refusing the body anyway: a stream that will not cancel changes nothing
      throw Errors.payloadTooLarge(limit);
    }
    parts.push(value);
  }
  if (bounds) return bounded(req, new TextDecoder().decode(Buffer.concat(parts)), bounds);
  return withBody(req, Buffer.concat(parts));
}
