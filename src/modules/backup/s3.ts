/**
 * Backups off the machine (docs/backup.md, "Backups in S3"), through Bun's S3 client: every
 * new archive is uploaded with a `<name>.sha256` beside it, read back and checked against that
 * hash before the backup is reported copied; retention deletes the bucket's copy with the local
 * one; `basalt restore s3://…` downloads an archive, checks it, and restores it.
 *
 * Where: `backup.s3_url` (`s3://KEY:SECRET@bucket/prefix?endpoint=…&region=…`; credentials may
 * come from the environment instead: S3_ACCESS_KEY_ID / AWS_ACCESS_KEY_ID…, as Bun's client
 * reads them); or, without it, the Files module's bucket when it stores uploads in S3 (settings
 * `ext.media-library.s3_*`, docs/files.md), under `basalt-backups/`.
 */
import { S3Client } from 'bun';
import { createHash } from 'node:crypto';
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Platform } from '../../platform';
import { ExtensionSettingsStore, type ExtensionSettings } from '../../extensions/settings-store';
import type { ExtensionRegistry } from '../../extensions/registry';

/** The prefix under the Files module's bucket, and the default under `backup.s3_url`'s. */
export const S3_PREFIX = 'basalt-backups/';
const FILES_EXTENSION = 'media-library';
const KEYS = ['s3_bucket', 's3_endpoint', 's3_region', 's3_access_key_id', 's3_secret_access_key'] as const;

export interface S3Target {
  bucket: string;
  /** Ends with `/` (or is empty: the bucket's root). */
  prefix: string;
  endpoint?: string;
  region?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
}

/** What a malformed `s3://` URL lacks, in words. */
export class S3UrlError extends Error {}

/**
 * `s3://[KEY:SECRET@]bucket[/prefix][?endpoint=URL&region=R]` → a target. Credentials are
 * percent-decoded; a prefix is normalized to end with `/`.
 */
export function parseS3Url(text: string, defaultPrefix = S3_PREFIX): S3Target {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new S3UrlError(`'${text.replace(/\/\/[^@/]*@/, '//…@')}' is not a URL; expected s3://bucket/prefix`);
  }
  if (u.protocol !== 's3:') throw new S3UrlError('an S3 location starts with s3:// (s3://bucket/prefix)');
  if (!u.hostname) throw new S3UrlError('an S3 location names its bucket: s3://bucket/prefix');
  for (const k of u.searchParams.keys())
    if (k !== 'endpoint' && k !== 'region') throw new S3UrlError(`unknown parameter '${k}'; use endpoint and region`);
  const path = decodeURIComponent(u.pathname.replace(/^\/+/, ''));
  const prefix = path === '' ? defaultPrefix : path.endsWith('/') ? path : `${path}/`;
  return {
    bucket: u.hostname,
    prefix,
    endpoint: u.searchParams.get('endpoint') || undefined,
    region: u.searchParams.get('region') || undefined,
    accessKeyId: u.username ? decodeURIComponent(u.username) : undefined,
    secretAccessKey: u.password ? decodeURIComponent(u.password) : undefined,
  };
}

/** The target for new backups: `backup.s3_url`, else the Files module's bucket, else none. */
export async function backupS3Target(
  p: Platform,
  extensions: Pick<ExtensionRegistry, 'settings'>,
): Promise<S3Target | undefined> {
  const url = p.settings.get('backup.s3_url');
  if (url) return parseS3Url(url);
  return filesS3Target(p, extensions);
}

/**
 * The Files module's S3 settings, or undefined when it keeps files locally. Read from the
 * loaded extension when the platform runs it, else from the stored settings directly.
 */
async function filesS3Target(
  p: Platform,
  extensions: Pick<ExtensionRegistry, 'settings'>,
): Promise<S3Target | undefined> {
  let settings: ExtensionSettings | undefined;
  try {
    settings = extensions.settings(FILES_EXTENSION);
  } catch {} // the Files module is not loaded: read its stored settings below
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
  return { bucket, prefix: S3_PREFIX, endpoint, region, accessKeyId, secretAccessKey };
}

function client(t: S3Target): S3Client {
  return new S3Client({
    bucket: t.bucket,
    endpoint: t.endpoint,
    region: t.region,
    accessKeyId: t.accessKeyId,
    secretAccessKey: t.secretAccessKey,
  });
}

async function sha256Of(stream: ReadableStream<Uint8Array>): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of stream) h.update(chunk);
  return h.digest('hex');
}

/** A copy whose bytes are not what was uploaded, or whose hash is missing. */
export class S3CheckError extends Error {}

/**
 * Upload the archive at `path` as `<prefix><name>` with `<name>.sha256`, then read the object
 * back and compare: a copy is reported only once it is known whole. Returns the key.
 */
export async function uploadArchive(t: S3Target, path: string, name: string): Promise<string> {
  const s3 = client(t);
  const key = t.prefix + name;
  const hash = await sha256Of(Bun.file(path).stream());
  await s3.write(key, Bun.file(path), { type: 'application/gzip' });
  await s3.write(`${key}.sha256`, `${hash}  ${name}\n`, { type: 'text/plain' });
  const back = await sha256Of(s3.file(key).stream());
  if (back !== hash) throw new S3CheckError(`s3://${t.bucket}/${key} reads back with SHA-256 ${back}, not ${hash}`);
  return key;
}

/** Delete the bucket's copy of `name` and its hash (retention, `basalt backup delete`). */
export async function deleteArchive(t: S3Target, name: string): Promise<void> {
  const s3 = client(t);
  await s3.delete(t.prefix + name);
  await s3.delete(`${t.prefix}${name}.sha256`);
}

const ARCHIVE = /^basalt-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ(-\d+)?\.tar\.gz$/;

/** Archive names under the target's prefix, oldest first (names sort by time). */
export async function listArchives(t: S3Target): Promise<string[]> {
  const s3 = client(t);
  const names: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.list({ prefix: t.prefix, continuationToken: token });
    for (const o of page.contents ?? []) {
      const name = o.key.slice(t.prefix.length);
      if (ARCHIVE.test(name)) names.push(name);
    }
    token = page.isTruncated ? page.nextContinuationToken : undefined;
  } while (token);
  return names.sort();
}

/**
 * Download `<prefix><name>` (the newest archive when `name` is undefined) to `to`, checked
 * against its `.sha256`. Throws S3CheckError naming what is wrong: no archive, no hash, a
 * hash that does not match.
 */
export async function downloadArchive(t: S3Target, name: string | undefined, to: string): Promise<string> {
  const s3 = client(t);
  const chosen = name ?? (await listArchives(t)).at(-1);
  if (!chosen) throw new S3CheckError(`no backup archive under s3://${t.bucket}/${t.prefix}`);
  const key = t.prefix + chosen;
  if (!(await s3.exists(key))) throw new S3CheckError(`s3://${t.bucket}/${key} does not exist`);
  if (!(await s3.exists(`${key}.sha256`)))
    throw new S3CheckError(`s3://${t.bucket}/${key}.sha256 is missing: the archive cannot be checked`);
  const want = (await s3.file(`${key}.sha256`).text()).trim().split(/\s+/)[0];
  // A backup holds every secret of the site: private from its first byte.
  writeFileSync(to, '', { mode: 0o600 });
  await Bun.write(to, s3.file(key));
  const got = await sha256Of(Bun.file(to).stream());
  if (got !== want) throw new S3CheckError(`s3://${t.bucket}/${key} has SHA-256 ${got}; its .sha256 says ${want}`);
  return chosen;
}

const WAL_FILE = /^([0-9A-F]{24}(\.partial)?|[0-9A-F]{8}\.history)$/;

/**
 * The WAL archive's copy under `<prefix>wal/` (src/modules/backup/wal-archive.ts) into `dir`,
 * each file checked against its `.sha256` (S3CheckError naming one that is not) and given its
 * upload time as its modification time: a restore reads how far the archive reaches from it.
 * Returns how many files came.
 */
export async function downloadWal(t: S3Target, dir: string): Promise<number> {
  const s3 = client(t);
  const prefix = `${t.prefix}wal/`;
  const found: { name: string; at: Date }[] = [];
  let token: string | undefined;
  do {
    const page = await s3.list({ prefix, continuationToken: token });
    for (const o of page.contents ?? []) {
      const name = o.key.slice(prefix.length);
      if (WAL_FILE.test(name)) found.push({ name, at: new Date(o.lastModified ?? Date.now()) });
    }
    token = page.isTruncated ? page.nextContinuationToken : undefined;
  } while (token);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const f of found) {
    const to = join(dir, f.name);
    await downloadArchive(t, `wal/${f.name}`, to);
    writeFileSync(`${to}.sha256`, `${await sha256Of(Bun.file(to).stream())}  ${f.name}\n`, { mode: 0o600 });
    utimesSync(to, f.at, f.at);
  }
  return found.length;
}

/**
 * What `basalt restore s3://…` names: one archive (`s3://bucket/prefix/basalt-….tar.gz`) or a
 * prefix (its newest archive). Credentials, endpoint and region the URL leaves out come from
 * `configured` (the `backup.s3_url` in the environment or config file) when it names the same
 * bucket, else from the environment as Bun's client reads it.
 */
export function locateArchive(text: string, configured: string): { target: S3Target; name?: string } {
  const t = parseS3Url(text, '');
  const segments = t.prefix.replace(/\/$/, '').split('/');
  const last = segments.at(-1) ?? '';
  const name = ARCHIVE.test(last) ? last : undefined;
  if (name) t.prefix = segments.length > 1 ? `${segments.slice(0, -1).join('/')}/` : '';
  if (configured) {
    const c = parseS3Url(configured);
    if (c.bucket === t.bucket) {
      t.endpoint ??= c.endpoint;
      t.region ??= c.region;
      if (!t.accessKeyId) {
        t.accessKeyId = c.accessKeyId;
        t.secretAccessKey = c.secretAccessKey;
      }
    }
  }
  return { target: t, name };
}
