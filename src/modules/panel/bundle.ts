/**
 * Bundles the administration panel (src/admin-ui) with Bun.build, in memory: one
 * JavaScript file and one stylesheet with content-hashed names, and the index.html
 * that references them. build.ts embeds the result in the executable; a checkout
 * (`npm start`, in-process tests) bundles at first request (see ./assets.ts).
 */
import { join, resolve } from 'node:path';
import { readdirSync, statSync } from 'node:fs';

export const PANEL_SOURCE = resolve(import.meta.dir, '../../admin-ui');
/** Where the hashed assets are served: `/_/assets/<name>`. */
export const ASSET_PREFIX = '/_/assets/';

export interface PanelOutput {
  /** `index.html`, `main-<hash>.js`, `styles-<hash>.css`. */
  name: string;
  text: string;
}

export async function bundlePanel(): Promise<PanelOutput[]> {
  const result = await Bun.build({
    entrypoints: [join(PANEL_SOURCE, 'main.tsx'), join(PANEL_SOURCE, 'styles.css')],
    target: 'browser',
    format: 'esm',
    minify: true,
    naming: '[name]-[hash].[ext]',
    define: { 'process.env.NODE_ENV': '"production"' },
  });
  if (!result.success)
    throw new AggregateError(result.logs, `the panel did not bundle: ${result.logs.map(String).join('; ')}`);
  const outputs: PanelOutput[] = [];
  let script = '';
  let style = '';
  for (const o of result.outputs) {
    const name = o.path.replace(/^.*\//, '');
    outputs.push({ name, text: await o.text() });
    if (o.kind === 'entry-point' && name.endsWith('.js')) script = name;
    if (name.endsWith('.css')) style = name;
  }
  if (!script || !style)
    throw new Error(`the panel bundle lacks its script or stylesheet: ${outputs.map((o) => o.name).join(', ')}`);
  const html = (await Bun.file(join(PANEL_SOURCE, 'index.html')).text())
    .replace('./styles.css', ASSET_PREFIX + style)
    .replace('./main.tsx', ASSET_PREFIX + script);
  outputs.push({ name: 'index.html', text: html });
  return outputs;
}

/** Latest modification time under the panel's source: a checkout rebundles when it moves. */
export function sourceStamp(dir = PANEL_SOURCE): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? sourceStamp(path) : statSync(path).mtimeMs);
  }
  return latest;
}
