/**
 * The API reference page and its document as an operator without extensions sees them:
 * no empty Files section when the media-library is not installed, and the page follows
 * the dark colour scheme (Swagger UI's own dark styles).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type TestServer } from '../helpers/server';

describe('API reference without the media-library (embedded)', () => {
  let s: TestServer;
  beforeAll(async () => {
    const empty = mkdtempSync(join(tmpdir(), 'basalt-no-extensions-'));
    s = await startServer('embedded', { env: { BASALT_EXTENSIONS_DIR: empty } });
  }, 600_000); // a fresh embedded database: minutes on a loaded machine
  afterAll(() => s?.stop());

  test('no tag without operations: no Files section', async () => {
    const doc = await (await fetch(`${s.url}/api/openapi.json`)).json();
    const used = new Set<string>();
    for (const ops of Object.values(doc.paths) as Record<string, { tags?: string[] }>[])
      for (const op of Object.values(ops)) for (const t of op.tags ?? []) used.add(t);
    expect(doc.tags.map((t: { name: string }) => t.name)).not.toContain('Files');
    for (const t of doc.tags) expect(used.has(t.name)).toBe(true);
  });

  test('the page switches to the dark styles with the system scheme', async () => {
    const init = await (await fetch(`${s.url}/api/docs/assets/init.js`)).text();
    expect(init).toContain("matchMedia('(prefers-color-scheme: dark)')");
    expect(init).toContain("classList.toggle('dark-mode'");
    const css = await (await fetch(`${s.url}/api/docs/assets/swagger-ui.css`)).text();
    expect(css).toContain('html.dark-mode .swagger-ui');
  });
});
