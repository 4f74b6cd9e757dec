/**
 * The panel's files ready to serve: bytes, gzip compressed once, content type and ETag.
 * From the executable's embedded copy, or bundled from src/admin-ui in a checkout
 * (rebundled when the source changes, so `npm start` picks up edits on reload).
 */
import { embeddedPanel, type EmbeddedPanelFile } from './embedded';

export interface PanelFile {
  name: string;
  type: string;
  body: Uint8Array;
  gzip: Uint8Array;
  etag: string;
}

export interface PanelAssets {
  index: PanelFile;
  /** Hashed assets by file name. */
  files: Map<string, PanelFile>;
}

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

export function prepare(outputs: EmbeddedPanelFile[]): PanelAssets {
  const files = new Map<string, PanelFile>();
  let index: PanelFile | undefined;
  for (const o of outputs) {
    const body = new TextEncoder().encode(o.text);
    const file: PanelFile = {
      name: o.name,
      type: TYPES[o.name.slice(o.name.lastIndexOf('.') + 1)] ?? 'application/octet-stream',
      body,
      gzip: Bun.gzipSync(body, { level: 9 }),
      etag: `"${Bun.hash(body).toString(36)}"`,
    };
    if (o.name === 'index.html') index = file;
    else files.set(o.name, file);
  }
  if (!index) throw new Error('the panel has no index.html');
  return { index, files };
}

/** Serves the embedded panel, or bundles the checkout's source (again when it changed). */
export function panelSource(): () => Promise<PanelAssets> {
  if (embeddedPanel) {
    const ready = prepare(embeddedPanel);
    return async () => ready;
  }
  let current: { stamp: number; assets: Promise<PanelAssets> } | undefined;
  // Hashed names of earlier bundles stay served: a page loaded before an edit keeps working.
  const served = new Map<string, PanelFile>();
  return async () => {
    const { bundlePanel, sourceStamp } = await import('./bundle');
    const stamp = sourceStamp();
    if (!current || current.stamp !== stamp) {
      const assets = bundlePanel().then(prepare);
      current = { stamp, assets };
      assets.catch(() => (current = undefined));
    }
    const assets = await current.assets;
    for (const [name, f] of assets.files) served.set(name, f);
    return { index: assets.index, files: served };
  };
}
