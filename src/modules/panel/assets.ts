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
  ts: 'application/typescript; charset=utf-8',
};

/**
 * Answers with `file`: 304 when If-None-Match names its ETag, else its bytes, gzip when the
 * client takes it (compressed once, in `prepare`); `headers` adds the caller's (cache, security).
 */
export function sendFile(req: Request, file: PanelFile, headers: Record<string, string>): Response {
  const all: Record<string, string> = {
    ...headers,
    'content-type': file.type,
    etag: file.etag,
    vary: 'Accept-Encoding',
  };
  if (req.headers.get('if-none-match') === file.etag) return new Response(null, { status: 304, headers: all });
  const gzip = /\bgzip\b/.test(req.headers.get('accept-encoding') ?? '');
  if (gzip) all['content-encoding'] = 'gzip';
  return new Response((gzip ? file.gzip : file.body) as Uint8Array<ArrayBuffer>, { headers: all });
}

/** A file ready to serve: its type by extension, its ETag, gzip compressed once. */
export function staticFile(name: string, text: string): PanelFile {
  const body = new TextEncoder().encode(text);
  return {
    name,
    type: TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream',
    body,
    gzip: Bun.gzipSync(body, { level: 9 }),
    etag: `"${Bun.hash(body).toString(36)}"`,
  };
}

export function prepare(outputs: EmbeddedPanelFile[]): PanelAssets {
  const files = new Map<string, PanelFile>();
  let index: PanelFile | undefined;
  for (const o of outputs) {
    const file = staticFile(o.name, o.text);
    if (o.name === 'index.html') index = file;
    else files.set(o.name, file);
  }
  if (!index) throw new Error('the panel has no index.html');
  return { index, files };
}

/**
 * A checkout's bundle: built at first use and again whenever the source's stamp moves;
 * a failed build is tried again at the next call. `source` names the stamp and the build.
 */
export function rebuiltWhenChanged<T>(
  source: () => Promise<{ stamp: number; build: () => Promise<T> }>,
): () => Promise<T> {
  let current: { stamp: number; value: Promise<T> } | undefined;
  return async () => {
    const { stamp, build } = await source();
    if (!current || current.stamp !== stamp) {
      const value = build();
      current = { stamp, value };
      value.catch(() => (current = undefined));
    }
    return current.value;
  };
}

/** Serves the embedded panel, or bundles the checkout's source (again when it changed). */
export function panelSource(): () => Promise<PanelAssets> {
  if (embeddedPanel) {
    const ready = prepare(embeddedPanel);
    return async () => ready;
  }
  const latest = rebuiltWhenChanged(async () => {
    const { bundlePanel, sourceStamp } = await import('./bundle');
    return { stamp: sourceStamp(), build: () => bundlePanel().then(prepare) };
  });
  // Hashed names of earlier bundles stay served: a page loaded before an edit keeps working.
  const served = new Map<string, PanelFile>();
  return async () => {
    const assets = await latest();
    for (const [name, f] of assets.files) served.set(name, f);
    return { index: assets.index, files: served };
  };
}
