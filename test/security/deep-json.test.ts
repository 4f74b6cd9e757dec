/**
 * The embedded engine never hangs on deeply nested jsonb (docs/operations.md, Limits and
 * bad input; src/db/embedded-guard.ts). The probe's sequence — a jsonb value nested
 * 20,000 levels, then any statement that raises an ordinary PostgreSQL error — used to
 * leave PGlite spinning inside its WebAssembly for good (no request, health check or
 * SIGTERM handled). That blocks the JS thread, so the sequence runs in a child process
 * (deep-json-child.ts) that this test kills after a timeout: without the guard it fails
 * by timing out instead of hanging the suite.
 */
import { expect, test } from 'bun:test';
import { resolve } from 'node:path';

const CHILD = resolve(import.meta.dir, 'deep-json-child.ts');
const LIMIT_MS = 90_000;

test(
  'embedded engine: 20,000 and 50,000 levels of jsonb end as an error, and the next errors still answer',
  async () => {
    const child = Bun.spawn([process.execPath, CHILD], { stdout: 'pipe', stderr: 'pipe', env: { ...process.env } });
    const killer = setTimeout(() => child.kill('SIGKILL'), LIMIT_MS);
    const [out, err, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    clearTimeout(killer);
    expect({ code, hung: child.signalCode === 'SIGKILL', err: code === 0 ? '' : err.slice(-2000) }).toEqual({
      code: 0,
      hung: false,
      err: '',
    });
    const got = JSON.parse(out.trim().split('\n').pop()!);
    expect(got).toEqual({
      // PostgreSQL's own answer to too deep input (as an external server gives): 54001.
      'engine 20000 levels': '54001',
      'engine NUL in text after 20000': '22021',
      'engine NUL in jsonb after 20000': '22P05',
      'engine 50000 levels': '54001',
      'engine NUL in text after 50000': '22021',
      'engine NUL in jsonb after 50000': '22P05',
      // Inside a transaction it fails like any statement: the transaction is aborted, then rolled back.
      'tx deep': '54001',
      'tx after': '25P02',
      'rolled back': true,
      'select 1': 'ok',
      // Over HTTP the body bound answers first (bounds.test.ts); the server stays responsive.
      'http deep select': [400, 'invalid_json'],
      'http login with NUL answers': true,
      'http insert NUL escape': 400,
      healthz: 200,
      readyz: 200,
    });
  },
  LIMIT_MS + 10_000,
);
