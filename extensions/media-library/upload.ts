/**
 * Receives a multipart upload straight into a temp file: the body is never held
 * in memory, its SHA-256 (the ETag) is computed on the way, and the transfer stops
 * with 413 as soon as the file passes the size limit.
 */
import { Readable } from 'node:stream';
import { rmSync } from 'node:fs';
import type { FileSink } from 'bun';
import { AppError, Errors, busboy } from 'basalt';
import { sanitizeName } from './names';

/** Bytes file-type needs to recognize any format it knows. */
const HEAD_BYTES = 4100;
/** Bytes written to the temp file between flushes; the upload waits for each flush (bounded memory). */
const FLUSH_BYTES = 256 * 1024;
/** Multipart framing and small fields around the file; a Content-Length beyond limit + this is refused unread. */
export const MULTIPART_SLACK = 64 * 1024;

export interface Received {
  tempPath: string;
  name: string;
  size: number;
  sha256: string;
  /** First bytes, for content-type detection. */
  head: Uint8Array;
}

export function receiveUpload(request: Request, maxBytes: number, tempPath: string): Promise<Received> {
  const type = request.headers.get('content-type') ?? '';
  if (!/^multipart\/form-data\s*;/i.test(type))
    throw Errors.unsupportedMediaType('multipart/form-data (with the file in a part named "file")');
  const length = Number(request.headers.get('content-length') ?? NaN);
  if (Number.isFinite(length) && length > maxBytes + MULTIPART_SLACK) throw Errors.payloadTooLarge(maxBytes);
  if (!request.body)
    throw Errors.badRequest('The request has no body; send the file in a multipart part named "file".');

  return new Promise<Received>((resolve, reject) => {
    let settled = false;
    let sink: FileSink | undefined;
    const source = Readable.fromWeb(request.body as never);
    const done = (err: unknown, value?: Received) => {
      if (settled) return;
      settled = true;
      if (err) {
        source.unpipe();
        source.destroy();
        // Close the temp file first (pending writes land), then remove it.
        const closing = sink ? Promise.resolve().then(() => sink!.end()) : Promise.resolve();
        sink = undefined;
        closing.catch(() => {}).finally(() => rmSync(tempPath, { force: true }));
        reject(err);
      } else resolve(value!);
    };
    let parser: ReturnType<typeof busboy>;
    try {
      // fileSize one past the limit: busboy flags a file that reaches it, and a file of exactly maxBytes is allowed.
      parser = busboy({
        headers: { 'content-type': type },
        defParamCharset: 'utf8',
        limits: { files: 1, fileSize: maxBytes + 1, fields: 20, fieldSize: 4096, parts: 21 },
      });
    } catch {
      return done(Errors.badRequest('Malformed multipart body: the Content-Type lacks a boundary.'));
    }
    let file: Promise<Received> | undefined;
    parser.on('file', (field, stream, info) => {
      if (field !== 'file' || file) return void stream.resume();
      file = new Promise<Received>((ok, fail) => {
        const hash = new Bun.CryptoHasher('sha256');
        const head: Buffer[] = [];
        let headLength = 0;
        let size = 0;
        let unflushed = 0;
        const out = (sink = Bun.file(tempPath).writer({ highWaterMark: FLUSH_BYTES * 2 }));
        stream.on('data', (chunk: Buffer) => {
          hash.update(chunk);
          size += chunk.length;
          if (size > maxBytes) return done(Errors.payloadTooLarge(maxBytes));
          if (headLength < HEAD_BYTES) {
            head.push(chunk.subarray(0, HEAD_BYTES - headLength));
            headLength += Math.min(chunk.length, HEAD_BYTES - headLength);
          }
          out.write(chunk);
          unflushed += chunk.length;
          if (unflushed >= FLUSH_BYTES) {
            // Backpressure: stop reading the request until the disk has taken this part.
            unflushed = 0;
            stream.pause();
            Promise.resolve(out.flush()).then(() => stream.resume(), fail);
          }
        });
        // Stop reading at once: the client gets its 413 without sending the rest.
        stream.on('limit', () => done(Errors.payloadTooLarge(maxBytes)));
        stream.on('error', fail);
        stream.on('end', () => {
          if (settled) return;
          sink = undefined;
          Promise.resolve(out.end()).then(
            () =>
              ok({
                tempPath,
                name: sanitizeName(info.filename),
                size,
                sha256: hash.digest('hex'),
                head: new Uint8Array(Buffer.concat(head)),
              }),
            fail,
          );
        });
      });
      file.catch(() => {});
    });
    parser.on('error', (e) => done(Errors.badRequest(`Malformed multipart body: ${(e as Error).message}.`)));
    parser.on('close', () => {
      if (!file) return done(Errors.badRequest('No file in the upload: send it in a multipart part named "file".'));
      file.then(
        (r) => done(undefined, r),
        (e) =>
          done(e instanceof AppError ? e : Errors.badRequest(`The upload could not be read: ${(e as Error).message}.`)),
      );
    });
    source.on('error', (e) => done(Errors.badRequest(`The upload was interrupted: ${e.message}.`)));
    source.pipe(parser);
  });
}
