import { describe, expect, test } from 'bun:test';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import pkg from '../../package.json';
import { ADMIN_URL, freshDb } from '../helpers/engines';
import { installBinary, runBinary, serveBinary } from '../helpers/binary';
import { expectA, replyOf } from '../helpers/envelopes';

/** The environment process `pid` runs with now: after an execve, the new one (/proc/<pid>/environ). */
const environOf = (pid: number): string[] => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
const LINUX = process.platform === 'linux';

describe('the single executable, alone in an empty directory', () => {
  test('version and help need nothing beside it', async () => {
    const { dir, exe } = await installBinary();
    expect(readdirSync(dir)).toEqual(['basalt']);
    const v = await runBinary(exe, ['version'], dir);
    expect(v).toMatchObject({ code: 0, stdout: pkg.version + '\n' });
    const h = await runBinary(exe, ['--help'], dir);
    expect(h.stdout).toContain('basalt serve');
  });

  test('serve starts on the embedded engine, serves its own docs assets, stops cleanly on SIGTERM', async () => {
    const { dir, exe } = await installBinary();
    const { proc, url, output } = await serveBinary(exe, dir, {});
    try {
      expectA(await replyOf(await fetch(url + '/readyz')), 200, { status: 'ready', database: 'embedded' });
      const doc = await (await fetch(url + '/api/openapi.json')).json();
      expect(doc.info.version).toBe(pkg.version);
      await SwaggerParser.validate(doc);
      const page = await (await fetch(url + '/api/docs')).text();
      for (const m of page.matchAll(/(?:src|href)="([^"]+)"/g)) {
        const r = await fetch(url + m[1]);
        expect(r.status).toBe(200);
      }
      expect(existsSync(join(dir, 'basalt_data', 'pg'))).toBe(true);
      expect(existsSync(join(dir, 'basalt_data', 'basalt.lock'))).toBe(true);
      // serve ran itself again, the same process, with the allocator's delay (docs/operations.md, "Memory and CPU").
      if (LINUX) expect(environOf(proc.pid)).toContain('MIMALLOC_PURGE_DELAY=10000');
    } finally {
      proc.kill('SIGTERM');
    }
    expect(await proc.exited).toBe(0);
    expect(await output()).toContain('"msg":"shutting down"');
    // The lock is released: the data dir can be opened again.
    expect(existsSync(join(dir, 'basalt_data', 'basalt.lock'))).toBe(false);
    const again = await runBinary(exe, ['settings', 'get', 'web.port'], dir);
    expect(again.stdout).toContain('web.port = 5000');
  });

  test.skipIf(!ADMIN_URL)('serve starts against external PostgreSQL', async () => {
    const { dir, exe } = await installBinary();
    const db = await freshDb('external');
    // An operator's own allocator setting is kept as it is.
    const { proc, url } = await serveBinary(exe, dir, { BASALT_DATABASE_URL: db.url, MIMALLOC_PURGE_DELAY: '250' });
    try {
      expect((await (await fetch(url + '/readyz')).json()).data.database).toBe('external');
      expect(existsSync(join(dir, 'basalt_data', 'pg'))).toBe(false);
      if (LINUX)
        expect(environOf(proc.pid).filter((v) => v.startsWith('MIMALLOC_PURGE_DELAY='))).toEqual([
          'MIMALLOC_PURGE_DELAY=250',
        ]);
    } finally {
      proc.kill('SIGTERM');
      await proc.exited;
      await db.drop();
    }
  });
});
