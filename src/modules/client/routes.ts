/**
 * The JS client (clients/js, docs/client.md) on the public listener: `GET /api/client.js`
 * (the ES module) and `GET /api/client.d.ts` (its declarations). Any origin may load them
 * (`Access-Control-Allow-Origin: *`: a module script from another origin is a CORS request,
 * and the file holds nothing private); ETag, gzip when taken. Cached 5 minutes and then
 * revalidated, or for a year with `?v=<server version>` (the version changes the URL).
 */
import { Elysia } from 'elysia';
import { prefixesOf, type AreaFacts } from '../../http/areas';
import type { Platform } from '../../platform';
import { rebuiltWhenChanged, sendFile, staticFile, type PanelFile } from '../panel/assets';
import { embeddedClient } from './embedded';

interface ClientFiles {
  js: PanelFile;
  dts: PanelFile;
}

/** The embedded client, or the checkout's bundled at first request (again when its source changed). */
function clientSource(): () => Promise<ClientFiles> {
  const ready = (built: { js: string; dts: string }) => ({
    js: staticFile('client.js', built.js),
    dts: staticFile('client.d.ts', built.dts),
  });
  if (embeddedClient) {
    const files = ready(embeddedClient);
    return async () => files;
  }
  return rebuiltWhenChanged(async () => {
    const { bundleClient, clientStamp } = await import('./bundle');
    return { stamp: clientStamp(), build: () => bundleClient().then(ready) };
  });
}

export function clientRoutes(p: Platform, area: AreaFacts) {
  const [jsPath, dtsPath] = prefixesOf(area) as [string, string];
  const files = clientSource();
  const send = (request: Request, file: PanelFile) => {
    const versioned = new URL(request.url).searchParams.get('v') === p.version;
    return sendFile(request, file, {
      'cache-control': versioned ? 'public, max-age=31536000, immutable' : 'public, max-age=300',
      'access-control-allow-origin': '*',
    });
  };
  const hide = { detail: { hide: true } };
  return new Elysia({ name: 'basalt.client' })
    .get(jsPath, async ({ request }) => send(request, (await files()).js), hide)
    .get(dtsPath, async ({ request }) => send(request, (await files()).dts), hide);
}
