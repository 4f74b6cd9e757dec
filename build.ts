/**
 * Builds the single executable `dist/basalt` (or `--outfile PATH`): the platform,
 * its SQL migrations, the PGlite engine files and the API reference assets, all
 * embedded. Run with `npm run build`.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';

const { values } = parseArgs({ args: Bun.argv.slice(2), options: { outfile: { type: 'string' } } });
const outfile = resolve(values.outfile ?? 'dist/basalt');

const started = performance.now();
const result = await Bun.build({
  entrypoints: [resolve(import.meta.dir, 'src/main.ts')],
  compile: { outfile },
  minify: true,
  sourcemap: 'linked',
  target: 'bun',
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
console.log(`built ${outfile} in ${Math.round(performance.now() - started)} ms`);
