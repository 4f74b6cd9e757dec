/**
 * Builds the JS client (clients/js, docs/client.md): one ES module by Bun.build, minified,
 * and its declarations by tsc (clients/js/tsconfig.json), into clients/js/dist. The module
 * must stay within CLIENT_MAX_GZIP_BYTES gzipped: past it the build fails, naming the size.
 * build.ts embeds the result in the executable; a checkout bundles at first request.
 */
import { join, resolve } from 'node:path';
import { statSync } from 'node:fs';

export const CLIENT_DIR = resolve(import.meta.dir, '../../../clients/js');
const ENTRY = join(CLIENT_DIR, 'src/client.ts');
/** The size budget of the whole module, gzipped (the peers' SDKs: pocketbase ≈ 11 KB). */
export const CLIENT_MAX_GZIP_BYTES = 12 * 1024;

export interface BuiltClient {
  js: string;
  dts: string;
  gzipBytes: number;
}

export async function bundleClient(): Promise<BuiltClient> {
  const result = await Bun.build({ entrypoints: [ENTRY], target: 'browser', format: 'esm', minify: true });
  if (!result.success)
    throw new AggregateError(result.logs, `the JS client did not bundle: ${result.logs.map(String).join('; ')}`);
  const js = await result.outputs[0]!.text();
  const gzipBytes = Bun.gzipSync(new TextEncoder().encode(js), { level: 9 }).length;
  if (gzipBytes > CLIENT_MAX_GZIP_BYTES)
    throw new Error(
      `clients/js: the module is ${gzipBytes} bytes gzipped, over its budget of ${CLIENT_MAX_GZIP_BYTES} (src/modules/client/bundle.ts)`,
    );
  const tsc = Bun.spawn([resolve(CLIENT_DIR, '../../node_modules/.bin/tsc'), '-p', join(CLIENT_DIR, 'tsconfig.json')], {
    stdout: 'pipe',
    stderr: 'pipe',
  });
  if ((await tsc.exited) !== 0)
    throw new Error(
      `clients/js: tsc failed: ${await new Response(tsc.stdout).text()}${await new Response(tsc.stderr).text()}`,
    );
  const dts = await Bun.file(join(CLIENT_DIR, 'dist/client.d.ts')).text();
  await Bun.write(join(CLIENT_DIR, 'dist/client.js'), js);
  return { js, dts, gzipBytes };
}

/** The source's modification time: a checkout rebundles when it moves. */
export function clientStamp(): number {
  return statSync(ENTRY).mtimeMs;
}
