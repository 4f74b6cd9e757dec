/**
 * The Files API (media-library extension) over HTTP, on both engines and both
 * storages: every endpoint and permission path, ranges, ETags, the size limit,
 * content-type detection and name sanitizing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { download, PNG, REPO_EXTENSIONS, startS3, upload } from './support';
import { signInUser, type SignedInUser } from '../helpers/users';
import { eventually } from '../helpers/wait';
import { expectC, expectCError } from '../helpers/envelopes';

const STORAGES = ['local', 's3'] as const;
const cases = ENGINES.flatMap((engine) => STORAGES.map((storage) => [engine, storage] as const));

describe.each(cases)('Files API on %s, %s storage', (engine, storage) => {
  let s: TestServer;
  let s3: Awaited<ReturnType<typeof startS3>> | undefined;
  let alice: SignedInUser;
  let bob: SignedInUser;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    if (storage === 's3') s3 = await startS3();
    s = await startServer(engine, { env: { BASALT_EXTENSIONS_DIR: REPO_EXTENSIONS, ...(s3?.env ?? {}) } });
    alice = await signInUser(s);
    bob = await signInUser(s);
    keys.upload = await createKey(s, { permissions: ['files:upload'] });
    keys.download = await createKey(s, { permissions: ['files:download'] });
    keys.all = await createKey(s, { permissions: ['files:*'] });
    keys.mail = await createKey(s, { permissions: ['mail:send'] });
    keys.public = await createKey(s, { type: 'public' });
  });
  afterAll(async () => {
    await s.stop();
    await s3?.stop();
  });

  test('media-library is loaded as version 1.0.1', async () => {
    const loaded = ON_SOURCE
      ? s.platform.services.extensions.get('media-library')
      : (await s.admin('GET', '/api/admin/extensions')).body.data.extensions.find(
          (e: { name: string }) => e.name === 'media-library',
        );
    expect(loaded).toMatchObject({ version: '1.0.1', ...(ON_SOURCE ? { status: 'loaded' } : { state: 'loaded' }) });
  });

  test('upload detects the content type from the bytes and sanitizes the name', async () => {
    const r = await upload(s, PNG, { name: '../../etc/<evil>\u202e.png', type: 'text/html', headers: alice.headers() });
    const hash = new Bun.CryptoHasher('sha256').update(PNG).digest('hex');
    expectC(r, 201, {
      file: {
        id: expect.any(String),
        name: '_evil_.png',
        content_type: 'image/png',
        size: PNG.length,
        etag: `"${hash}"`,
        created_at: expect.any(String),
        owner: { type: 'user', id: alice.user.id },
        url: `/api/v1/files/${r.body.file.id}/content`,
      },
    });
    const text = await upload(s, 'plain words\n', { name: ' résumé  ü.txt. ', headers: alice.headers() });
    expect(text.body.file).toMatchObject({ name: 'résumé ü.txt', content_type: 'text/plain; charset=utf-8' });
    const hidden = await upload(s, 'x', { name: '.htaccess', headers: alice.headers() });
    expect(hidden.body.file.name).toBe('htaccess');
    const binary = await upload(s, new Uint8Array([0, 1, 2, 3, 255, 254]), {
      name: 'x.exe',
      type: 'image/png',
      headers: alice.headers(),
    });
    expect(binary.body.file.content_type).toBe('application/octet-stream');
  });

  test('where the bytes are stored', async () => {
    const r = await upload(s, 'stored bytes', { headers: { 'x-api-key': keys.upload! } });
    expect(r.status).toBe(201);
    const localDir = join(s.db.dataDir, 'extensions', 'media-library', 'files', r.body.file.id.slice(0, 2));
    expect(existsSync(join(localDir, r.body.file.id))).toBe(storage === 'local');
    // No temp file is left behind either way.
    expect(readdirSync(join(s.db.dataDir, 'extensions', 'media-library', 'tmp'))).toEqual([]);
  });

  test('a files:* key uploads, downloads and deletes; after delete the stored bytes are gone', async () => {
    const r = await upload(s, 'key-owned bytes', { name: 'k.txt', headers: { 'x-api-key': keys.all! } });
    expect(r.status).toBe(201);
    expect(r.body.file).toMatchObject({ name: 'k.txt', size: 15, owner: { type: 'key', id: expect.any(String) } });
    const id: string = r.body.file.id;
    const got = await download(s, id, { 'x-api-key': keys.all! });
    expect([got.status, new TextDecoder().decode(got.bytes)]).toEqual([200, 'key-owned bytes']);

    // Look where the bytes are kept, past the API: the data dir, or the bucket itself.
    const stored = async () => {
      if (storage === 'local')
        return existsSync(join(s.db.dataDir, 'extensions', 'media-library', 'files', id.slice(0, 2), id));
      const e = s3!.env;
      const client = new Bun.S3Client({
        bucket: e.BASALT_EXT_MEDIA_LIBRARY_S3_BUCKET,
        endpoint: e.BASALT_EXT_MEDIA_LIBRARY_S3_ENDPOINT,
        region: e.BASALT_EXT_MEDIA_LIBRARY_S3_REGION,
        accessKeyId: e.BASALT_EXT_MEDIA_LIBRARY_S3_ACCESS_KEY_ID,
        secretAccessKey: e.BASALT_EXT_MEDIA_LIBRARY_S3_SECRET_ACCESS_KEY,
      });
      return client.exists(`files/${id}`);
    };
    expect(await stored()).toBe(true);
    const del = await s.req('DELETE', `/api/v1/files/${id}`, { headers: { 'x-api-key': keys.all! } });
    expectC(del, 200, { deleted: id });
    expect(await stored()).toBe(false);
  });

  test.each([
    ['no credentials', {}, 401, 'unauthorized'],
    ['unknown API key', { 'x-api-key': 'sk_nope' }, 401, 'unauthorized'],
    ['forged bearer token', { authorization: 'Bearer abc.def.ghi' }, 401, 'unauthorized'],
    ['key with files:download only', 'download', 403, 'forbidden'],
    ['key with mail:send only', 'mail', 403, 'forbidden'],
    ['public key', 'public', 403, 'forbidden'],
  ] as const)('upload refused: %s → %d', async (_name, auth, status, code) => {
    const headers = typeof auth === 'string' ? { 'x-api-key': keys[auth]! } : auth;
    const r = await upload(s, 'x', { headers });
    expectCError(r, status, code);
  });

  test.each([
    ['not multipart', { 'content-type': 'application/json' }, '{"a":1}', 415],
    ['multipart without a boundary', { 'content-type': 'multipart/form-data; x=1' }, 'abc', 400],
  ] as const)('bad upload body: %s → %d', async (_n, headers, raw, status) => {
    const r = await s.req('POST', '/api/v1/files', { raw, headers: { ...headers, 'x-api-key': keys.upload! } });
    expect(r.status).toBe(status);
    expect(r.body.success).toBe(false);
  });

  test('a multipart body without a "file" part → 400', async () => {
    const r = await upload(s, 'x', { field: 'other', headers: { 'x-api-key': keys.upload! } });
    expect(r.status).toBe(400);
    expect(r.body.error).toContain('"file"');
  });

  test('list, metadata and delete: users see only their own files; keys see all', async () => {
    const mine = (await upload(s, 'alice file', { headers: alice.headers() })).body.file;
    const theirs = (await upload(s, 'bob file', { headers: bob.headers() })).body.file;

    const aliceList = await s.req('GET', '/api/v1/files?limit=100', { headers: alice.headers() });
    expectC(aliceList, 200);
    expect(aliceList.body.files.every((f: any) => f.owner.id === alice.user.id)).toBe(true);
    expect(aliceList.body.files.map((f: any) => f.id)).toContain(mine.id);
    expect(aliceList.body).toMatchObject({ success: true, total: aliceList.body.files.length, limit: 100, offset: 0 });

    const keyList = await s.req('GET', `/api/v1/files?owner_type=user&owner_id=${bob.user.id}`, {
      headers: { 'x-api-key': keys.download! },
    });
    expect(keyList.body.files.map((f: any) => f.id)).toEqual([theirs.id]);

    const page = await s.req('GET', '/api/v1/files?limit=1&offset=1', { headers: { 'x-api-key': keys.all! } });
    expect(page.body.files).toHaveLength(1);
    expect(page.body.total).toBeGreaterThan(2);

    const scenarios: [string, string, string, Record<string, string>, number][] = [
      ['owner reads metadata', 'GET', `/api/v1/files/${mine.id}`, alice.headers(), 200],
      ['another user cannot see it', 'GET', `/api/v1/files/${mine.id}`, bob.headers(), 404],
      ['download key reads it', 'GET', `/api/v1/files/${mine.id}`, { 'x-api-key': keys.download! }, 200],
      ['upload-only key cannot read', 'GET', `/api/v1/files/${mine.id}`, { 'x-api-key': keys.upload! }, 403],
      [
        'upload-only key cannot download',
        'GET',
        `/api/v1/files/${mine.id}/content`,
        { 'x-api-key': keys.upload! },
        403,
      ],
      ['upload-only key cannot list', 'GET', '/api/v1/files', { 'x-api-key': keys.upload! }, 403],
      ['not a uuid', 'GET', '/api/v1/files/nope', alice.headers(), 404],
      [
        'users cannot filter by owner',
        'GET',
        `/api/v1/files?owner_type=user&owner_id=${bob.user.id}`,
        alice.headers(),
        403,
      ],
      ['limit beyond 100', 'GET', '/api/v1/files?limit=101', alice.headers(), 400],
      ['limit far beyond 100', 'GET', '/api/v1/files?limit=1000', alice.headers(), 400],
      ['negative limit', 'GET', '/api/v1/files?limit=-1', alice.headers(), 400],
      ['limit not a number', 'GET', '/api/v1/files?limit=ten', alice.headers(), 400],
      ['negative offset', 'GET', '/api/v1/files?offset=-1', alice.headers(), 400],
      ['another user cannot delete', 'DELETE', `/api/v1/files/${mine.id}`, bob.headers(), 404],
      ['download-only key cannot delete', 'DELETE', `/api/v1/files/${mine.id}`, { 'x-api-key': keys.download! }, 403],
      ['owner deletes', 'DELETE', `/api/v1/files/${mine.id}`, alice.headers(), 200],
      ['gone afterwards', 'GET', `/api/v1/files/${mine.id}`, alice.headers(), 404],
      ['gone for keys too', 'GET', `/api/v1/files/${mine.id}/content`, { 'x-api-key': keys.all! }, 404],
      ['key deletes any file', 'DELETE', `/api/v1/files/${theirs.id}`, { 'x-api-key': keys.all! }, 200],
    ];
    for (const [name, method, path, headers, status] of scenarios) {
      const r = await s.req(method, path, { headers });
      expect({ name, status: r.status }).toEqual({ name, status });
      expect(r.body.success).toBe(status === 200);
    }
  });

  test('download: whole file, ranges (206, 416), HEAD, ETag and 304', async () => {
    const bytes = new Uint8Array(10_000).map((_, i) => i % 251);
    const f = (await upload(s, bytes, { name: 'data.bin', headers: alice.headers() })).body.file;
    const h = alice.headers();

    const whole = await download(s, f.id, h);
    expect(whole.status).toBe(200);
    expect(whole.bytes).toEqual(bytes);
    expect(whole.headers.get('etag')).toBe(f.etag);
    expect(whole.headers.get('accept-ranges')).toBe('bytes');
    expect(whole.headers.get('content-type')).toBe('application/octet-stream');
    expect(whole.headers.get('content-disposition')).toBe(`attachment; filename="data.bin"; filename*=UTF-8''data.bin`);

    const ranges: [string, number, [number, number] | null, string][] = [
      ['bytes=0-99', 206, [0, 99], 'bytes 0-99/10000'],
      ['bytes=9990-', 206, [9990, 9999], 'bytes 9990-9999/10000'],
      ['bytes=-10', 206, [9990, 9999], 'bytes 9990-9999/10000'],
      ['bytes=9000-20000', 206, [9000, 9999], 'bytes 9000-9999/10000'],
      ['bytes=10000-', 416, null, 'bytes */10000'],
      ['bytes=-0', 416, null, 'bytes */10000'],
      ['bytes=0-1,5-6', 200, [0, 9999], ''],
      ['items=0-5', 200, [0, 9999], ''],
    ];
    for (const [range, status, span, contentRange] of ranges) {
      const r = await download(s, f.id, { ...h, range });
      expect({ range, status: r.status }).toEqual({ range, status });
      if (span) expect(r.bytes).toEqual(bytes.slice(span[0], span[1] + 1));
      expect(r.headers.get('content-range') ?? '').toBe(contentRange);
    }

    const head = await fetch(`${s.url}/api/v1/files/${f.id}/content`, {
      method: 'HEAD',
      headers: { ...h, range: 'bytes=0-99' },
    });
    expect([
      head.status,
      head.headers.get('content-length'),
      head.headers.get('etag'),
      (await head.arrayBuffer()).byteLength,
    ]).toEqual([206, '100', f.etag, 0]);

    const notModified = await download(s, f.id, { ...h, 'if-none-match': f.etag });
    expect(notModified.status).toBe(304);
    expect(notModified.bytes.length).toBe(0);
    expect((await download(s, f.id, { ...h, 'if-none-match': '"other"' })).status).toBe(200);
    // If-Range with a stale ETag: the whole file, not the range.
    expect((await download(s, f.id, { ...h, range: 'bytes=0-9', 'if-range': '"stale"' })).status).toBe(200);

    const png = (await upload(s, PNG, { name: 'pic.png', headers: alice.headers() })).body.file;
    const inline = await download(s, png.id, h);
    expect(inline.headers.get('content-disposition')).toStartWith('inline;');
    expect(inline.headers.get('x-content-type-options')).toBe('nosniff');
  });

  test.if(storage === 'local')(
    'S3 settings take effect live; an unreachable bucket → 503 and nothing recorded',
    async () => {
      const before = (await s.req('GET', '/api/v1/files', { headers: { 'x-api-key': keys.all! } })).body.total;
      await s.setExtensionSetting('media-library', 's3_endpoint', 'http://127.0.0.1:1');
      await s.setExtensionSetting('media-library', 's3_bucket', 'nowhere');
      try {
        const r = await upload(s, 'x', { headers: { 'x-api-key': keys.upload! } });
        expectCError(r, 503, 'storage_unavailable', 'The file storage is unavailable; retry shortly.');
      } finally {
        await s.setExtensionSetting('media-library', 's3_bucket', null);
        await s.setExtensionSetting('media-library', 's3_endpoint', null);
      }
      expect((await s.req('GET', '/api/v1/files', { headers: { 'x-api-key': keys.all! } })).body.total).toBe(before);
      expect((await upload(s, 'x', { headers: { 'x-api-key': keys.upload! } })).status).toBe(201);
    },
  );

  test('size limit (files.max_bytes) → 413, early on Content-Length or while streaming', async () => {
    await s.settings.set('files.max_bytes', 100_000);
    try {
      const way_over = await upload(s, new Uint8Array(300_000), { headers: alice.headers() });
      expectCError(way_over, 413, 'payload_too_large', 'The request body is larger than 100000 bytes.');
      // Within Content-Length slack: refused by the streaming parser once the file passes the limit.
      const just_over = await upload(s, new Uint8Array(100_001), { headers: alice.headers() });
      expect(just_over.status).toBe(413);
      const at_limit = await upload(s, new Uint8Array(100_000), { headers: alice.headers() });
      expect(at_limit.status).toBe(201);
      expect(readdirSync(join(s.db.dataDir, 'extensions', 'media-library', 'tmp'))).toEqual([]);
    } finally {
      await s.settings.unset('files.max_bytes');
    }
  });

  test('a chunked upload 20× files.max_bytes (no Content-Length) is refused with 413 while still being sent: streamed, not buffered', async () => {
    const max = 64 * 1024;
    const chunk = new Uint8Array(16 * 1024).fill(7);
    const total = 20 * max;
    await s.settings.set('files.max_bytes', max);
    const count = async () => (await s.req('GET', '/api/v1/files', { headers: { 'x-api-key': keys.all! } })).body.total;
    const before = await count();
    try {
      const boundary = 'basalt-stream-boundary';
      const enc = new TextEncoder();
      let sent = 0;
      let sentWhenAnswered = -1;
      let answered!: () => void;
      const answer = new Promise<void>((r) => (answered = r));
      let phase = 0;
      let hold: Promise<unknown> | undefined;
      // Sends 4× the limit, then holds the rest back once, until the server has answered (or 5 s
      // pass): a server that read the whole body before answering would only answer after the hold.
      const body = new ReadableStream<Uint8Array>({
        async pull(c) {
          if (phase === 0) {
            phase = 1;
            return c.enqueue(
              enc.encode(
                `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`,
              ),
            );
          }
          if (sent >= total) {
            c.enqueue(enc.encode(`\r\n--${boundary}--\r\n`));
            return c.close();
          }
          if (sent >= 4 * max) await (hold ??= Promise.race([answer, Bun.sleep(5_000)]));
          sent += chunk.length;
          c.enqueue(chunk);
        },
      });
      const started = performance.now();
      const res = await fetch(`${s.url}/api/v1/files`, {
        method: 'POST',
        body,
        headers: { ...alice.headers(), 'content-type': `multipart/form-data; boundary=${boundary}` },
      }).then((r) => {
        sentWhenAnswered = sent;
        answered();
        return r;
      });
      const elapsed = performance.now() - started;
      expectCError(
        { status: res.status, body: await res.json() },
        413,
        'payload_too_large',
        `The request body is larger than ${max} bytes.`,
      );
      expect(sentWhenAnswered).toBeLessThanOrEqual(4 * max);
      expect(elapsed).toBeLessThan(4_000);
      // The temp file is removed once the writer has closed: give it a moment.
      const tmp = join(s.db.dataDir, 'extensions', 'media-library', 'tmp');
      await eventually(() => readdirSync(tmp).length === 0, {
        timeout: 2000,
        interval: 50,
        what: 'the temp file to be removed',
      });
      expect(readdirSync(tmp)).toEqual([]);
      expect(await count()).toBe(before);
    } finally {
      await s.settings.unset('files.max_bytes');
    }
  });

  test('files.max_bytes defaults to 25 MiB (26214400 bytes), as docs/files.md and docs/configuration.md say', async () => {
    const value = ON_SOURCE
      ? s.platform.settings.get('files.max_bytes')
      : (await s.admin('GET', '/api/admin/settings')).body.data.settings.find(
          (x: { key: string }) => x.key === 'files.max_bytes',
        ).value;
    expect(value).toBe(26_214_400);
  });
});
