/**
 * Where file bytes live: the data dir (default) or an S3 bucket through Bun's
 * built-in client when `s3_bucket` is set. Every file row records its storage, so
 * files uploaded before a switch stay readable.
 */
import { S3Client } from 'bun';
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ExtensionSettings } from 'basalt';

export type StorageKind = 'local' | 's3';

export interface Storage {
  readonly kind: StorageKind;
  /** Move a finished temp file into place under `key`. */
  put(key: string, tempPath: string, contentType: string): Promise<void>;
  /** Bytes [start, end] inclusive (or the whole file). */
  read(key: string, range?: { start: number; end: number }): ReadableStream<Uint8Array> | Blob;
  delete(key: string): Promise<void>;
}

export function localStorage(root: string): Storage {
  const pathOf = (key: string) => join(root, key);
  return {
    kind: 'local',
    async put(key, tempPath) {
      mkdirSync(dirname(pathOf(key)), { recursive: true });
      renameSync(tempPath, pathOf(key));
    },
    read: (key, range) => (range ? Bun.file(pathOf(key)).slice(range.start, range.end + 1) : Bun.file(pathOf(key))),
    async delete(key) {
      rmSync(pathOf(key), { force: true });
    },
  };
}

export function s3Storage(client: S3Client): Storage {
  return {
    kind: 's3',
    async put(key, tempPath, contentType) {
      await client.write(key, Bun.file(tempPath), { type: contentType });
      rmSync(tempPath, { force: true });
    },
    read: (key, range) => (range ? client.file(key).slice(range.start, range.end + 1) : client.file(key)).stream(),
    async delete(key) {
      await client.delete(key);
    },
  };
}

/** The storages, following the live settings (a changed S3 setting takes effect on the next request). */
export function storages(settings: ExtensionSettings, root: string) {
  const local = localStorage(root);
  let s3: { config: string; storage: Storage } | undefined;
  const s3Config = () => ({
    bucket: settings.get<string>('s3_bucket'),
    endpoint: settings.get<string>('s3_endpoint') || undefined,
    region: settings.get<string>('s3_region') || undefined,
    accessKeyId: settings.get<string>('s3_access_key_id') || undefined,
    secretAccessKey: settings.get<string>('s3_secret_access_key') || undefined,
  });
  const s3Storage_ = (): Storage => {
    const config = s3Config();
    if (!config.bucket) throw new Error('S3 storage is not configured (ext.media-library.s3_bucket is empty)');
    const key = JSON.stringify(config);
    if (s3?.config !== key) s3 = { config: key, storage: s3Storage(new S3Client(config)) };
    return s3.storage;
  };
  return {
    /** Where new uploads go. */
    current: (): Storage => (settings.get<string>('s3_bucket') ? s3Storage_() : local),
    of: (kind: StorageKind): Storage => (kind === 's3' ? s3Storage_() : local),
  };
}
