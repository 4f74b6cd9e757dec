/**
 * Builds the single executable `dist/basalt` (or `--outfile PATH`): the platform,
 * its SQL migrations, the PGlite engine files, the API reference assets, the
 * administration panel (bundled first into panel/ beside the executable) and the JS
 * client (built first into clients/js/dist, at most 12 KB gzipped), all embedded. Run
 * with `npm run build`; `--client-only` builds the JS client alone; `--version V` stamps V
 * instead of package.json's version (a second build to take over the first in
 * test/binary/takeover.test.ts).
 */
import { parseArgs } from 'node:util';
import { dirname, join, resolve } from 'node:path';
import { rmSync } from 'node:fs';
import { bundlePanel } from './src/modules/panel/bundle';
import { bundleClient, CLIENT_DIR, CLIENT_MAX_GZIP_BYTES } from './src/modules/client/bundle';

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: { outfile: { type: 'string' }, 'client-only': { type: 'boolean' }, version: { type: 'string' } },
});
const outfile = resolve(values.outfile ?? 'dist/basalt');

const started = performance.now();
// The JS client: clients/js/dist/client.js and client.d.ts, embedded below as text.
const client = await bundleClient();
console.log(`clients/js: client.js ${client.gzipBytes} bytes gzipped (budget ${CLIENT_MAX_GZIP_BYTES})`);
if (values['client-only']) process.exit(0);
const clientFiles = ['client.js', 'client.d.ts'].map((f) => JSON.stringify(join(CLIENT_DIR, 'dist', f)));
const embeddedClient =
  `import js from ${clientFiles[0]} with { type: 'text' };\nimport dts from ${clientFiles[1]} with { type: 'text' };\n` +
  'export const embeddedClient = { js, dts };\n';
// The panel first: bundled into panel/ beside the executable, then embedded by replacing
// src/modules/panel/embedded.ts (null in a checkout) with a module that imports its files.
const panel = await bundlePanel();
const panelDir = join(dirname(outfile), 'panel');
rmSync(panelDir, { recursive: true, force: true });
for (const f of panel) await Bun.write(join(panelDir, f.name), f.text);
const embedded =
  panel.map((f, i) => `import f${i} from ${JSON.stringify(join(panelDir, f.name))} with { type: 'text' };`).join('\n') +
  `\nexport const embeddedPanel = [${panel.map((f, i) => `{ name: ${JSON.stringify(f.name)}, text: f${i} }`).join(', ')}];\n`;
const result = await Bun.build({
  entrypoints: [resolve(import.meta.dir, 'src/main.ts')],
  files: {
    [resolve(import.meta.dir, 'src/modules/panel/embedded.ts')]: embedded,
    [resolve(import.meta.dir, 'src/modules/client/embedded.ts')]: embeddedClient,
    ...(values.version && {
      [resolve(import.meta.dir, 'src/version.ts')]:
        `export const VERSION: string = ${JSON.stringify(values.version)};\n`,
    }),
  },
  compile: { outfile },
  // Not `identifiers`: Elysia's compiled handlers recognise a failed TypeBox decode by
  // `error.constructor.name === 'TransformDecodeError'`, and a renamed class makes them
  // drop the error silently, so a query's `t.Integer({ minimum })` let `-1` through as the
  // string "-1" (a 500 further down). test/security/bounds.test.ts asks this of the executable.
  minify: { whitespace: true, syntax: true, identifiers: false },
  sourcemap: 'linked',
  target: 'bun',
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
console.log(`built ${outfile} in ${Math.round(performance.now() - started)} ms`);
