/**
 * The Files API (media-library 1.0.1) at /api/v1/files, envelope C:
 * `{success:true, ...payload}` / `{success:false, error:"message"}`.
 */
import { t, type ExtensionContext } from 'basalt';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { callerOf, type Caller } from './access';
import { detectType } from './detect';
import { filesStore, type FileRow } from './files-store';
import { contentResponse } from './download';
import { storages } from './storage';
import { receiveUpload } from './upload';

const FileInfo = t.Object(
  {
    id: t.String({ format: 'uuid' }),
    name: t.String({ description: 'Sanitized file name as uploaded.' }),
    content_type: t.String({ description: 'Detected from the bytes, never taken from the client.' }),
    size: t.Integer({ description: 'Bytes.' }),
    etag: t.String({ description: 'Strong ETag: the quoted SHA-256 of the content.' }),
    created_at: t.String({ format: 'date-time' }),
    owner: t.Object({ type: t.Union([t.Literal('user'), t.Literal('key')]), id: t.String() }),
    url: t.String({ description: 'Path of the content (GET, supports Range and If-None-Match).' }),
  },
  { title: 'FileInfo', description: 'A stored file.' },
);
/** The raw bytes of a file (OpenAPI 3.1: an unconstrained body of the response's media type). */
const binary = { description: 'The bytes of the file.' };
const contentHeaders = {
  ETag: { $ref: '#/components/headers/ETag' },
  'Accept-Ranges': { $ref: '#/components/headers/AcceptRanges' },
  'Content-Disposition': { $ref: '#/components/headers/ContentDisposition' },
  'Last-Modified': { $ref: '#/components/headers/LastModified' },
};

function info(row: FileRow) {
  return {
    id: row.id,
    name: row.name,
    content_type: row.content_type,
    size: Number(row.size),
    etag: `"${row.sha256}"`,
    created_at: row.created_at.toISOString(),
    owner: { type: row.owner_type, id: row.owner_id },
    url: `/api/v1/files/${row.id}/content`,
  };
}

export function fileRoutes(ctx: ExtensionContext) {
  const store = filesStore(ctx.db);
  const root = ctx.dataDir();
  const where = storages(ctx.settings, join(root, 'files'));
  const tmp = join(root, 'tmp');
  mkdirSync(tmp, { recursive: true });
  const errors = (...statuses: number[]) => ctx.schemas.errors('C', ...statuses);
  const notFound = () => ctx.errors.notFound('No such file (or it belongs to someone else).');

  const content = async (who: Caller, request: Request, id: string, forceDownload: boolean) => {
    const row = await store.find(who, id);
    if (!row) throw notFound();
    return contentResponse(row, where.of(row.storage), request, forceDownload);
  };

  return ctx
    .claim('/api/v1/files')
    .post(
      '',
      async ({ request, set, user, apiKey }) => {
        const who = callerOf({ user, apiKey });
        const id = crypto.randomUUID();
        const got = await receiveUpload(request, ctx.platformSetting('files.max_bytes'), join(tmp, id));
        const storage = where.current();
        const key = storage.kind === 'local' ? `${id.slice(0, 2)}/${id}` : `files/${id}`;
        const contentType = await detectType(got.head);
        try {
          await storage.put(key, got.tempPath, contentType);
        } catch (e) {
          rmSync(got.tempPath, { force: true });
          ctx.log.error('file storage failed', { storage: storage.kind, cause: e });
          throw new ctx.AppError(503, 'storage_unavailable', 'The file storage is unavailable; retry shortly.');
        }
        let row: FileRow;
        try {
          row = await store.insert({
            id,
            owner_type: who.type,
            owner_id: who.id,
            name: got.name,
            content_type: contentType,
            size: String(got.size),
            sha256: got.sha256,
            storage: storage.kind,
            storage_key: key,
          });
        } catch (e) {
          await storage.delete(key).catch(() => {});
          throw e;
        }
        set.status = 201;
        return ctx.reply(request, { file: info(row) });
      },
      {
        userOrApiKey: 'files:upload',
        parse: 'none',
        response: { 201: ctx.schemas.envelopeC(t.Object({ file: FileInfo })), ...errors(400, 401, 403, 413, 415, 503) },
        detail: {
          summary: 'Upload a file',
          'x-codes': {
            401: ['unauthorized', 'token_expired', 'session_revoked'],
            403: ['forbidden'],
            413: ['payload_too_large'],
            415: ['unsupported_media_type'],
            503: ['storage_unavailable'],
          },
          description:
            'multipart/form-data with the file in a part named `file`. The content type is detected from the bytes; the name is sanitized. Larger than `files.max_bytes` (default 25 MB) → 413. Needs a user access token or an API key with `files:upload`.',
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: {
                  type: 'object' as const,
                  required: ['file'],
                  properties: { file: { type: 'string' as const, format: 'binary' } },
                },
              },
            },
          },
          security: [{ Bearer: [] }, { ApiKey: [] }],
        },
      },
    )
    .get(
      '',
      async ({ request, query, user, apiKey }) => {
        const who = callerOf({ user, apiKey });
        if ((query.owner_type === undefined) !== (query.owner_id === undefined))
          throw ctx.errors.badRequest('Give owner_type and owner_id together.');
        if (query.owner_type && who.type === 'user')
          throw ctx.errors.forbidden('Users list only their own files; owner filters are for API keys.');
        const limit = query.limit ?? 50;
        const offset = query.offset ?? 0;
        const owner = query.owner_type ? { type: query.owner_type, id: query.owner_id! } : undefined;
        const { rows, total } = await store.list(who, { limit, offset, owner });
        return ctx.reply(request, { files: rows.map(info), total, limit, offset });
      },
      {
        userOrApiKey: 'files:download',
        query: t.Object({
          // `title` names the field in a 400 (src/http/foundation.ts: Elysia reports these values without a path).
          limit: t.Optional(
            t.Integer({
              title: 'limit',
              minimum: 1,
              maximum: 100,
              default: 50,
              description: 'Files per page, 1 to 100.',
            }),
          ),
          offset: t.Optional(t.Integer({ title: 'offset', minimum: 0, default: 0, description: 'Files to skip.' })),
          owner_type: t.Optional(
            t.Union([t.Literal('user'), t.Literal('key')], { description: 'API keys only: files of one owner.' }),
          ),
          owner_id: t.Optional(t.String({ maxLength: 100 })),
        }),
        response: {
          200: t.Composite(
            [
              t.Object({ success: t.Literal(true) }),
              t.Object({ files: t.Array(FileInfo), total: t.Integer(), limit: t.Integer(), offset: t.Integer() }),
            ],
            { title: 'FileList', description: 'One page of files, newest first.' },
          ),
          ...errors(400, 401, 403),
        },
        detail: {
          summary: 'List files',
          'x-codes': { 400: ['validation_error'], 401: ['unauthorized'], 403: ['forbidden'] },
          description:
            'Newest first. A user sees their own files; an API key with `files:download` sees all, optionally one owner’s.',
          security: [{ Bearer: [] }, { ApiKey: [] }],
        },
      },
    )
    .get(
      '/:id',
      async ({ request, params, user, apiKey }) => {
        const row = await store.find(callerOf({ user, apiKey }), params.id);
        if (!row) throw notFound();
        return ctx.reply(request, { file: info(row) });
      },
      {
        userOrApiKey: 'files:download',
        params: t.Object({ id: t.String() }),
        response: { 200: ctx.schemas.envelopeC(t.Object({ file: FileInfo })), ...errors(401, 403, 404) },
        detail: {
          summary: 'File metadata',
          'x-codes': { 401: ['unauthorized'], 403: ['forbidden'], 404: ['not_found'] },
          security: [{ Bearer: [] }, { ApiKey: [] }],
        },
      },
    )
    .get(
      '/:id/content',
      ({ request, params, query, user, apiKey }) =>
        content(callerOf({ user, apiKey }), request, params.id, query.download !== undefined),
      {
        userOrApiKey: 'files:download',
        params: t.Object({ id: t.String() }),
        query: t.Object({
          download: t.Optional(t.String({ description: 'Present: always Content-Disposition: attachment.' })),
        }),
        detail: {
          summary: 'Download a file',
          'x-codes': { 401: ['unauthorized'], 403: ['forbidden'], 404: ['not_found'], 416: ['range_not_satisfiable'] },
          description:
            'The bytes, sent with the Content-Type detected at upload (`content_type` of the file), with `ETag` (If-None-Match → 304) and `Range` (one byte range → 206; outside the file → 416). ' +
            'HEAD answers the same status and headers without the bytes. Errors are JSON (format C).',
          security: [{ Bearer: [] }, { ApiKey: [] }],
          // HEAD is answered by this handler too (download.ts); the document lists it.
          'x-head': true,
          parameters: [
            { name: 'Range', in: 'header', required: false, schema: { type: 'string' }, example: 'bytes=0-1023' },
            { name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' } },
            {
              name: 'If-Range',
              in: 'header',
              required: false,
              schema: { type: 'string' },
              description: 'An ETag: the Range applies only while it still matches.',
            },
          ],
          responses: {
            200: { description: 'The whole file.', headers: contentHeaders, content: { '*/*': { schema: binary } } },
            206: {
              description: 'The requested byte range.',
              headers: { ...contentHeaders, 'Content-Range': { $ref: '#/components/headers/ContentRange' } },
              content: { '*/*': { schema: binary } },
            },
            304: {
              description: 'Not modified (If-None-Match matched the ETag).',
              headers: { ETag: { $ref: '#/components/headers/ETag' } },
            },
            401: { description: 'No valid credentials' },
            403: { description: 'The API key lacks files:download' },
            404: { description: 'No such file for this caller' },
            416: { description: 'Range not satisfiable; Content-Range gives the size' },
          },
        } as never,
      },
    )
    .delete(
      '/:id',
      async ({ request, params, user, apiKey }) => {
        const row = await store.remove(callerOf({ user, apiKey }), params.id);
        if (!row) throw notFound();
        // The row is gone first, so the file disappears from the API even if the bytes linger.
        await where
          .of(row.storage)
          .delete(row.storage_key)
          .catch((e) => ctx.log.warn('file bytes not deleted', { id: row.id, storage: row.storage, cause: e }));
        return ctx.reply(request, { deleted: row.id });
      },
      {
        userOrApiKey: 'files:upload',
        params: t.Object({ id: t.String() }),
        response: {
          200: ctx.schemas.envelopeC(t.Object({ deleted: t.String({ format: 'uuid' }) })),
          ...errors(401, 403, 404),
        },
        detail: {
          summary: 'Delete a file',
          'x-codes': { 401: ['unauthorized'], 403: ['forbidden'], 404: ['not_found'] },
          description: 'Needs the owner’s access token or an API key with `files:upload`.',
          security: [{ Bearer: [] }, { ApiKey: [] }],
        },
      },
    );
}
