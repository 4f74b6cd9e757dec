/**
 * Extensions and the Files API, as ratios against baselines measured in the same run:
 *  - GET of an extension route (/api/module/bench/ping → envelope B) against a minimal
 *    Bun.serve answering the same JSON;
 *  - download of a 1 MiB file, whole and one 64 KiB range, against a minimal Bun.serve
 *    streaming the same bytes from a file on disk (Bun.file / slice);
 *  - upload of a 1 MiB file (multipart) against a minimal Bun.serve that parses the
 *    multipart body with Request.formData() and writes the file to disk.
 * Local storage; the embedded engine, and external PostgreSQL when
 * BASALT_TEST_DATABASE_URL is set. Traffic goes to 127.0.0.1 only, bounded in count.
 *
 *   bun bench/files.ts            # BENCH_REQUESTS=400 per cell by default
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ENGINES } from '../test/helpers/engines';
import { startServer } from '../test/helpers/server';
import { createKey } from '../test/helpers/keys';
import { countedLoad, fmt, printTable } from './support';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 400);
const CONCURRENCY = 8;
const MiB = 1024 * 1024;
const work = mkdtempSync(join(tmpdir(), 'basalt-bench-files-'));
const extDir = join(work, 'extensions');
mkdirSync(join(extDir, 'bench'), { recursive: true });
writeFileSync(
  join(extDir, 'bench', 'index.ts'),
  `import { defineExtension } from 'basalt';
export default defineExtension({ name: 'bench', version: '1.0.0', setup(ctx) { ctx.routes.get('/ping', ({ request }) => ctx.reply(request, { pong: true })); } });`,
);
// media-library from the repository, beside the bench extension.
const { cpSync } = await import('node:fs');
cpSync(resolve(import.meta.dir, '../extensions/media-library'), join(extDir, 'media-library'), { recursive: true });

const bytes = new Uint8Array(MiB).map((_, i) => (i * 31) % 256);
const onDisk = join(work, 'baseline.bin');
writeFileSync(onDisk, bytes);

const rows: string[][] = [];
for (const engine of ENGINES) {
  const s = await startServer(engine, { env: { BASALT_EXTENSIONS_DIR: extDir, BASALT_LOG_LEVEL: 'silent' } });
  const key = await createKey(s, { permissions: ['files:*'] });
  const form = () => {
    const f = new FormData();
    f.append('file', new Blob([bytes]), 'bench.bin');
    return f;
  };
  const up = await fetch(`${s.url}/api/v1/files`, { method: 'POST', body: form(), headers: { 'x-api-key': key } });
  const id = ((await up.json()) as { file: { id: string } }).file.id;

  let uploads = 0;
  const baseline = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const url = new URL(req.url);
      if (url.pathname === '/ping') return Response.json({ success: true, data: { pong: true }, meta: {}, errors: [] });
      if (url.pathname === '/file') {
        const range = req.headers.get('range');
        if (range) return new Response(Bun.file(onDisk).slice(0, 65536), { status: 206 });
        return new Response(Bun.file(onDisk));
      }
      const file = (await req.formData()).get('file') as File;
      await Bun.write(join(work, `up-${uploads++}`), file);
      return Response.json({ success: true }, { status: 201 });
    },
  });
  const b = `http://127.0.0.1:${baseline.port}`;
  const h = { 'x-api-key': key };

  const cells: [string, () => Promise<Response>, () => Promise<Response>, number, number][] = [
    [
      'extension route GET /api/module/bench/ping',
      () => fetch(`${s.publicUrl}/api/module/bench/ping`),
      () => fetch(`${b}/ping`),
      200,
      REQUESTS * 5,
    ],
    [
      'download 1 MiB',
      () => fetch(`${s.url}/api/v1/files/${id}/content`, { headers: h }),
      () => fetch(`${b}/file`),
      200,
      REQUESTS,
    ],
    [
      'download range 64 KiB',
      () => fetch(`${s.url}/api/v1/files/${id}/content`, { headers: { ...h, range: 'bytes=0-65535' } }),
      () => fetch(`${b}/file`, { headers: { range: 'bytes=0-65535' } }),
      206,
      REQUESTS,
    ],
    [
      'upload 1 MiB (multipart)',
      () => fetch(`${s.url}/api/v1/files`, { method: 'POST', body: form(), headers: h }),
      () => fetch(`${b}/upload`, { method: 'POST', body: form() }),
      201,
      Math.ceil(REQUESTS / 2),
    ],
  ];

  try {
    for (const [name, basalt, base, status, count] of cells) {
      await countedLoad(Math.min(50, count), CONCURRENCY, basalt, status); // warm-up
      await countedLoad(Math.min(50, count), CONCURRENCY, base, status);
      const a = await countedLoad(count, CONCURRENCY, basalt, status);
      const c = await countedLoad(count, CONCURRENCY, base, status);
      rows.push([
        `${name} (${engine})`,
        fmt(a.perSecond),
        fmt(c.perSecond),
        (a.perSecond / c.perSecond).toFixed(2),
        a.p50.toFixed(2),
        c.p50.toFixed(2),
      ]);
    }
  } finally {
    baseline.stop(true);
    await s.stop();
  }
}
rmSync(work, { recursive: true, force: true });

const head = [
  'scenario (local storage, 8 clients)',
  'basalt req/s',
  'baseline req/s',
  'ratio',
  'basalt p50 ms',
  'baseline p50 ms',
];
printTable([head, ...rows], undefined);
