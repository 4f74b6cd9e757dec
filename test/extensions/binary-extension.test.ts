/**
 * The compiled executable loads extensions (.ts and .js) from `./extensions` beside
 * it — even when started from another working directory — with no Bun and no
 * node_modules around: `basalt` (with busboy), `elysia` and
 * `file-type` come from inside the executable. Uses the shared build of test/helpers/binary.ts
 * (build.ts); skipped, saying why, when build.ts is absent.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cpSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { installBinary, runBinary, serveBinary } from '../helpers/binary';
import { PNG, REPO_EXTENSIONS } from './support';
import { IMPORT_THROWS } from './fixtures';
import { createKeyByCli } from '../helpers/keys';

const HAS_BUILD = existsSync(resolve(import.meta.dir, '../../build.ts'));
if (!HAS_BUILD) console.warn('binary-extension.test.ts: skipped — build.ts is missing, so no executable can be built');

const JS_EXTENSION = `
import { defineExtension, t } from 'basalt';
export default defineExtension({
  name: 'plain-js',
  version: '0.1.0',
  setup(ctx) {
    ctx.routes.get('/hello', ({ request }) => ctx.reply(request, { hello: 'from js' }), {
      response: { 200: ctx.schemas.envelope(t.Object({ hello: t.String() })) },
      detail: { tags: ['plain-js'], summary: 'Hello' },
    });
  },
});
`;

describe.skipIf(!HAS_BUILD)('the executable with extensions beside it', () => {
  let dir: string;
  let exe: string;
  /** The working directory of every run: NOT the executable's folder, and with no extensions of its own. */
  let elsewhere: string;
  let env: Record<string, string>;
  let server: { proc: Subprocess<'ignore', 'pipe', 'pipe'>; url: string; output: () => Promise<string> };
  let key: string;

  beforeAll(async () => {
    const installed = await installBinary();
    dir = installed.dir;
    exe = installed.exe;
    elsewhere = mkdtempSync(join(tmpdir(), 'basalt-cwd-'));
    const ext = join(dir, 'extensions');
    cpSync(join(REPO_EXTENSIONS, 'media-library'), join(ext, 'media-library'), { recursive: true });
    mkdirSync(join(ext, 'plain-js'), { recursive: true });
    writeFileSync(join(ext, 'plain-js', 'index.js'), JS_EXTENSION);
    mkdirSync(join(ext, 'broken'), { recursive: true });
    writeFileSync(join(ext, 'broken', 'index.ts'), IMPORT_THROWS);
    env = { BASALT_DATA_DIR: join(dir, 'data') };
    ({ key } = await createKeyByCli(exe, elsewhere, env, { service: 'files', permissions: ['files:*'] }));
    server = await serveBinary(exe, elsewhere, env);
  }, 240_000);
  afterAll(async () => {
    server?.proc.kill('SIGTERM');
    await server?.proc.exited;
  });

  test('a .js extension serves its route', async () => {
    const r = await fetch(`${server.url}/api/module/plain-js/hello`);
    expect(r.status).toBe(200);
    expect((await r.json()).data).toEqual({ hello: 'from js' });
  });

  test('media-library (.ts) uploads with busboy and detects the type with file-type, from inside the executable', async () => {
    const form = new FormData();
    form.append('file', new Blob([PNG], { type: 'text/plain' }), 'pixel.png');
    const up = await fetch(`${server.url}/api/v1/files`, { method: 'POST', body: form, headers: { 'x-api-key': key } });
    const body = await up.json();
    expect(up.status).toBe(201);
    expect(body.file).toMatchObject({ name: 'pixel.png', content_type: 'image/png', size: PNG.length });
    const got = await fetch(`${server.url}/api/v1/files/${body.file.id}/content`, {
      headers: { 'x-api-key': key, range: 'bytes=0-7' },
    });
    expect(got.status).toBe(206);
    expect(new Uint8Array(await got.arrayBuffer())).toEqual(PNG.slice(0, 8));
  });

  test('the failing extension did not stop the platform, and the OpenAPI document has the loaded ones', async () => {
    const doc = await (await fetch(`${server.url}/api/openapi.json`)).json();
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/api/module/plain-js/hello', '/api/v1/files', '/api/v1/files/{id}/content']),
    );
    expect((await fetch(`${server.url}/api/module/broken/anything`)).status).toBe(404);
  });

  test('the log names the failed extension and its error', async () => {
    server.proc.kill('SIGTERM');
    await server.proc.exited;
    const out = await server.output();
    const failed = out
      .split('\n')
      .filter((l) => l.includes('"extension failed"'))
      .map((l) => JSON.parse(l));
    expect(failed).toEqual([
      expect.objectContaining({
        level: 'error',
        extension: 'broken',
        error: expect.stringContaining('broken at import'),
      }),
    ]);
  });

  // Runs after the server above has stopped: the embedded data dir has one owner at a time.
  test('an absolute extensions.dir is used as is; a missing one is logged at info with the path scanned', async () => {
    const other = mkdtempSync(join(tmpdir(), 'basalt-other-ext-'));
    mkdirSync(join(other, 'plain-js'));
    writeFileSync(join(other, 'plain-js', 'index.js'), JS_EXTENSION);
    const absolute = await runBinary(exe, ['extensions', 'list', '--json'], elsewhere, {
      ...env,
      BASALT_EXTENSIONS_DIR: other,
      BASALT_LOG_LEVEL: 'error',
    });
    expect(absolute.code).toBe(0);
    expect(JSON.parse(absolute.stdout).map((r: { name: string; folder: string }) => [r.name, r.folder])).toEqual([
      ['plain-js', join(other, 'plain-js')],
    ]);

    const missing = await runBinary(exe, ['extensions', 'list'], elsewhere, {
      ...env,
      BASALT_EXTENSIONS_DIR: 'nope',
      BASALT_LOG_LEVEL: 'info',
    });
    expect(missing.code).toBe(0);
    const lines = missing.stdout.split('\n');
    expect(lines).toContain(`no extensions in ${join(dir, 'nope')}`);
    const logged = lines.filter((l) => l.includes('extensions directory does not exist')).map((l) => JSON.parse(l));
    expect(logged).toEqual([expect.objectContaining({ level: 'info', dir: join(dir, 'nope') })]);
  }, 60_000);
});
