import type { Server } from 'bun';
import { AppError, Errors } from './errors';
import { errorResponse } from './envelope';
import { clientIp, setRequestInfo } from './request-info';
import { toAppError } from './foundation';
import type { Settings } from '../config/settings';
import type { Logger } from '../log';
import type { Metrics } from './metrics';

/** Areas that take only JSON bodies: 415 for anything else. */
const JSON_AREAS = ['/api/v1/auth/', '/api/v1/db/', '/api/v1/mail/', '/api/admin/'];
/**
 * Streamed uploads: the Files module counts the bytes as they arrive and answers 413 past
 * files.max_bytes, so bodies here are not buffered or capped by this layer. Every other
 * body, whatever its type (JSON, urlencoded, multipart to an extension route), is capped
 * at web.max_json_body_bytes.
 */
const STREAMED_AREAS = ['/api/v1/files'];
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const EXPOSED = 'X-Request-Id, Retry-After, Idempotent-Replayed, ETag, Content-Range, Accept-Ranges, Content-Disposition';

export interface HandlerDeps {
  settings: Settings;
  log: Logger;
  /** Elysia's `handle`. */
  handle: (req: Request) => Promise<Response>;
  metrics?: Metrics;
}

export type Handler = (req: Request, server?: Server<unknown>) => Promise<Response>;

/**
 * The listener's fetch: request id, CORS, body limits and content type, request
 * log. Everything here answers in the area's envelope, like the app does.
 */
export function createHandler({ settings, log, handle, metrics }: HandlerDeps): Handler {
  return async (req, server) => {
    const start = performance.now();
    const incoming = req.headers.get('x-request-id');
    const id = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    const peer = server?.requestIP(req)?.address ?? '127.0.0.1';
    const ip = clientIp(peer, req.headers.get('x-forwarded-for'), settings.get<string[]>('web.trusted_proxies'));
    const path = new URL(req.url).pathname;
    const info = { id, start, ip };
    const origin = req.headers.get('origin');
    const corsOk = !!origin && settings.get<string[]>('web.cors_origins').includes(origin);

    let res: Response;
    try {
      if (req.method === 'OPTIONS' && req.headers.has('access-control-request-method')) {
        res = new Response(null, { status: 204 });
        if (corsOk) {
          res.headers.set('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE, OPTIONS');
          res.headers.set('Access-Control-Allow-Headers', req.headers.get('access-control-request-headers') ?? 'Content-Type, Authorization, X-API-Key');
          res.headers.set('Access-Control-Max-Age', '600');
        }
      } else {
        const checked = await checkBody(req, path, settings.get<number>('web.max_json_body_bytes'));
        setRequestInfo(checked, info);
        res = await handle(checked);
      }
    } catch (err) {
      const appErr = err instanceof AppError ? err : toAppError(err, path);
      if (appErr.status >= 500) log.error('request failed', { request_id: id, path, cause: err });
      res = errorResponse(path, appErr, info);
    }

    try {
      res.headers.set('X-Request-Id', id);
    } catch {
      res = new Response(res.body, res); // immutable headers (e.g. a proxied response)
      res.headers.set('X-Request-Id', id);
    }
    if (corsOk) {
      res.headers.set('Access-Control-Allow-Origin', origin!);
      res.headers.set('Access-Control-Allow-Credentials', 'true');
      res.headers.set('Access-Control-Expose-Headers', EXPOSED);
    }
    if (origin) res.headers.append('Vary', 'Origin');
    const ms = Math.round((performance.now() - start) * 10) / 10;
    metrics?.observe(path, req.method, res.status, ms);
    log.info('request', { request_id: id, method: req.method, path, status: res.status, ms, ip });
    return res;
  };
}

function inArea(path: string, prefix: string): boolean {
  const p = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  return path === p || path.startsWith(p + '/');
}

async function checkBody(req: Request, path: string, limit: number): Promise<Request> {
  if (STREAMED_AREAS.some((p) => inArea(path, p))) return req;
  const length = req.headers.get('content-length');
  const chunked = !length && req.body !== null;
  if (length === '0' || (!length && !chunked)) return req;
  if (BODY_METHODS.has(req.method) && JSON_AREAS.some((p) => inArea(path, p))) {
    const type = (req.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json' && !type.endsWith('+json')) throw Errors.unsupportedMediaType();
  }
  if (length && Number(length) > limit) throw Errors.payloadTooLarge(limit);
  if (!chunked) return req;
  // No Content-Length: read at most limit+1 bytes rather than trusting the stream.
  const reader = req.body!.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw Errors.payloadTooLarge(limit);
    }
    parts.push(value);
  }
  return new Request(req.url, { method: req.method, headers: req.headers, body: Buffer.concat(parts) });
}
