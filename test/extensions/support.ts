/**
 * Shared pieces of the extension suites: fixture extensions written into temp
 * dirs, multipart uploads and a local S3 server (s3rver). Signed-in site users:
 * test/helpers/users.ts.
 */
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import S3rver from 's3rver';
import type { TestServer } from '../helpers/server';

/** The repository's first-party extensions folder. */
export const REPO_EXTENSIONS = resolve(import.meta.dir, '../../extensions');

/** A temp extensions dir with the given files (`<folder>/index.ts` → source). */
export function extensionsDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'basalt-ext-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Multipart upload of `bytes` as part `field` (default `file`). */
export function upload(
  s: TestServer,
  bytes: Uint8Array | string,
  opts: { name?: string; type?: string; headers?: Record<string, string>; field?: string } = {},
) {
  const form = new FormData();
  form.append(
    opts.field ?? 'file',
    new Blob([bytes as BlobPart], { type: opts.type ?? 'application/octet-stream' }),
    opts.name ?? 'upload.bin',
  );
  return s.req('POST', '/api/v1/files', { raw: form, headers: opts.headers ?? {} });
}

/** Raw GET of a file's content (headers matter here). */
export async function download(s: TestServer, id: string, headers: Record<string, string>) {
  const res = await fetch(`${s.url}/api/v1/files/${id}/content`, { headers });
  return { status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) };
}

/** A local S3 server with bucket `basalt`; env points media-library at it. */
export async function startS3(): Promise<{ env: Record<string, string>; stop(): Promise<void> }> {
  const directory = mkdtempSync(join(tmpdir(), 'basalt-s3-'));
  const server = new S3rver({
    port: 0,
    address: '127.0.0.1',
    silent: true,
    directory,
    configureBuckets: [{ name: 'basalt', configs: [] }],
  });
  const { port } = (await server.run()) as unknown as { port: number };
  return {
    env: {
      BASALT_EXT_MEDIA_LIBRARY_S3_BUCKET: 'basalt',
      BASALT_EXT_MEDIA_LIBRARY_S3_ENDPOINT: `http://127.0.0.1:${port}`,
      BASALT_EXT_MEDIA_LIBRARY_S3_REGION: 'us-east-1',
      BASALT_EXT_MEDIA_LIBRARY_S3_ACCESS_KEY_ID: 'S3RVER',
      BASALT_EXT_MEDIA_LIBRARY_S3_SECRET_ACCESS_KEY: 'S3RVER',
    },
    async stop() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** A real 1×1 PNG. */
export const PNG = Uint8Array.from(
  Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
    'base64',
  ),
);
