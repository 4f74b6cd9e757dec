/**
 * The content response of a file: ETag and If-None-Match (304), one byte range
 * (206 / 416), safe Content-Disposition, streamed from its storage. Elysia answers
 * HEAD through this same handler: same status and headers, no body (it counts the
 * bytes to set Content-Length).
 */
import { AppError } from 'basalt';
import type { FileRow } from './files-store';
import { contentDisposition } from './names';
import { etagMatches, parseRange } from './range';
import type { Storage } from './storage';

/** Types safe to show inline; everything else (HTML, SVG, scripts) downloads as an attachment. */
const INLINE = /^(image\/(png|jpeg|gif|webp|avif|bmp)|audio\/|video\/|application\/pdf$|text\/plain)/;

export function contentResponse(row: FileRow, storage: Storage, request: Request, forceDownload: boolean): Response {
  const size = Number(row.size);
  const etag = `"${row.sha256}"`;
  const inline = INLINE.test(row.content_type) && !forceDownload;
  const headers: Record<string, string> = {
    ETag: etag,
    'Accept-Ranges': 'bytes',
    'Cache-Control': 'private, no-cache',
    'Last-Modified': row.created_at.toUTCString(),
    'X-Content-Type-Options': 'nosniff',
    'Content-Security-Policy': "default-src 'none'; sandbox",
    'Content-Disposition': contentDisposition(inline ? 'inline' : 'attachment', row.name),
  };
  if (etagMatches(request.headers.get('if-none-match'), etag)) return new Response(null, { status: 304, headers });
  // If-Range with another ETag: the client's partial copy is stale, send it all.
  const ifRange = request.headers.get('if-range');
  const range =
    ifRange && ifRange !== etag ? ({ kind: 'full' } as const) : parseRange(request.headers.get('range'), size);
  if (range.kind === 'unsatisfiable') {
    throw new AppError(416, 'range_not_satisfiable', `The requested range is outside the file (${size} bytes).`, {
      headers: { 'Content-Range': `bytes */${size}` },
    });
  }
  headers['Content-Type'] = row.content_type;
  if (range.kind === 'partial') {
    headers['Content-Range'] = `bytes ${range.start}-${range.end}/${size}`;
    headers['Content-Length'] = String(range.end - range.start + 1);
    return new Response(storage.read(row.storage_key, range), { status: 206, headers });
  }
  headers['Content-Length'] = String(size);
  return new Response(storage.read(row.storage_key), { status: 200, headers });
}
