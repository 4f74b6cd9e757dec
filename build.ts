/**
 * Builds the single executable `dist/basalt` (or `--outfile PATH`): the platform,
 * its SQL migrations, the PGlite engine files, the API reference assets and the
 * administration panel (bundled first into
 * panel/ beside the executable), all embedded. Run with `npm run build`.
 */
import { parseArgs } from 'node:util';
import { dirname, join, resolve } from 'node:path';
import { rmSync } from 'node:fs';
import { bundlePanel } from './src/modules/panel/bundle';

const { values } = parseArgs({ args: Bun.argv.slice(2), options: { outfile: { type: 'string' } } });
const outfile = resolve(values.outfile ?? 'dist/basalt');

const started = performance.now();
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
  files: { [resolve(import.meta.dir, 'src/modules/panel/embedded.ts')]: embedded },
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
