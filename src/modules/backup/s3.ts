/**
 * An off-machine copy of each backup (docs/backup.md): when the Files module stores
 * uploads in S3 (settings `ext.media-library.s3_*`, docs/files.md), every new archive is
 * also uploaded to that bucket as `basalt-backups/<name>`, through Bun's S3 client. The
 * local archive stays the one `list`/`restore` use; copies in the bucket are kept until
 * the bucket's own lifecycle rules remove them.
 */
import { S3Client } from 'bun';
import type { Platform } from '../../platform';
import { ExtensionSettingsStore, type ExtensionSettings } from '../../extensions/settings-store';
import type { ExtensionRegistry } from '../../extensions/registry';

export const S3_PREFIX = 'basalt-backups/';
const FILES_EXTENSION = 'media-library';
const KEYS = ['s3_bucket', 's3_endpoint', 's3_region', 's3_access_key_id', 's3_secret_access_key'] as const;

export interface S3Target {
  bucket: string;
  endpoint?: string;
  region?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
}

/**
 * The Files module's S3 settings, or undefined when it keeps files locally. Read from the
 * loaded extension when the platform runs it, else from the stored settings directly.
 */
export async function filesS3Target(
  p: Platform,
  extensions: Pick<ExtensionRegistry, 'settings'>,
): Promise<S3Target | undefined> {
  let settings: ExtensionSettings | undefined;
  try {
    settings = extensions.settings(FILES_EXTENSION);
  } catch {}
  if (!settings) {
    const store = new ExtensionSettingsStore(p.settings.layers, p.db);
    await store.load();
    settings = store.forExtension(
      FILES_EXTENSION,
      Object.fromEntries(
        KEYS.map((k) => [k, { kind: 'string', default: '', description: k, secret: k === 's3_secret_access_key' }]),
      ),
    );
  }
  const [bucket, endpoint, region, accessKeyId, secretAccessKey] = KEYS.map(
    (k) => settings!.get<string>(k) || undefined,
  );
  if (!bucket) return undefined;
  return { bucket, endpoint, region, accessKeyId, secretAccessKey };
}

/** Upload `path` as `basalt-backups/<name>`; returns the key. */
export async function uploadArchive(target: S3Target, path: string, name: string): Promise<string> {
  const key = S3_PREFIX + name;
  await new S3Client(target).write(key, Bun.file(path), { type: 'application/gzip' });
  return key;
}
