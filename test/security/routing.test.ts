/**
 * Routing from the request's real path, whatever the Host (docs/operations.md, Limits
 * and bad input): a short host used to shift the router's view of the path (`Host: x`
 * served `POST /zz/api/v1/db/query` as `/api/v1/db/query` and answered 404 on
 * `/healthz`). A malformed Host is refused with 400 `invalid_host` in the area's
 * envelope, before routing. Raw sockets, since fetch sets the Host itself.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, startServer, type TestServer } from '../helpers/server';
import { pathOf } from '../../src/http/envelope';
import { rawRequest, requestText } from './raw-http';
import { expectA, expectAError, expectBError, expectCError } from '../helpers/envelopes';

/** One request with this Host (null: no Host header at all); the single response, and it as a Reply-like `answer`. */
async function withHost(s: TestServer, method: string, target: string, host: string | null, body?: string) {
  const headers: [string, string][] = host === null ? [] : [['Host', host]];
  if (body !== undefined)
    headers.push(['Content-Type', 'application/json'], ['Content-Length', String(Buffer.byteLength(body))]);
  // The server closes the connection after its answer (requestText asks it to): the quiet
  // allowance only matters on a busy machine, where 700 ms without a byte is no proof of silence.
  const r = await rawRequest(s.url, requestText(method, target, headers, body), 15_000);
  expect(r.responses).toHaveLength(1);
  const res = r.responses[0]!;
  let json: any;
  try {
    json = JSON.parse(res.body);
  } catch {}
  return { ...res, json, answer: { status: res.status, body: json, headers: new Headers(res.headers) } };
}

const GOOD_HOSTS = [
  'x',
  'ab',
  'abc',
  'a:1',
  'x:5000',
  '[::1]',
  '[::1]:8080',
  'x.',
  'a_b',
  'EXAMPLE.com',
  'api.example.com:443',
  'exa%41mple',
];
const BAD_HOSTS = [
  '',
  ' ',
  'a b',
  'x:99999',
  'x:65536',
  'x:0',
  'x:abc',
  'x:-1',
  ':80',
  'x/y',
  'x@y',
  'x?y',
  'x#y',
  'x\\y',
  'x,y',
  '..',
  '.x',
  'ünïcode.example',
  '[::1',
  'host\tname',
];

describe.each(ENGINES)('routing and the Host header on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine);
  });
  afterAll(() => s.stop());

  describe.each(GOOD_HOSTS)('Host %j', (host) => {
    test('each path is served as itself', async () => {
      expect((await withHost(s, 'GET', '/healthz', host)).status).toBe(200);
      expectA((await withHost(s, 'GET', '/api/v1/public/runtime-config?x=1', host)).answer, 200);
      const shifted = await withHost(s, 'GET', '/zz/healthz', host);
      expectAError(shifted.answer, 404, 'not_found');
      const db = await withHost(s, 'POST', '/zz/api/v1/db/query', host, '{"entity":"x","action":"select"}');
      expectAError(db.answer, 404, 'not_found');
      // The real path still reaches the Database API (no key → 401).
      expect((await withHost(s, 'POST', '/api/v1/db/query', host, '{"entity":"x","action":"select"}')).status).toBe(
        401,
      );
    });
  });

  test.each(BAD_HOSTS)('Host %j → 400 invalid_host in format A', async (host) => {
    const r = await withHost(s, 'GET', '/healthz', host);
    expectAError(r.answer, 400, 'invalid_host');
    expect(r.headers['x-request-id']).toBeTruthy();
    expect(r.headers['x-content-type-options']).toBe('nosniff');
  });

  test('the 400 comes in the envelope of the area asked for', async () => {
    const mail = await withHost(s, 'POST', '/api/v1/mail/send', 'x:0', '{}');
    expectBError(mail.answer, 400, 'invalid_host');
    const files = await withHost(s, 'GET', '/api/v1/files', '');
    expectCError(files.answer, 400, 'invalid_host');
    const preflight = await withHost(s, 'OPTIONS', '/api/v1/db/query', 'a b');
    expect(preflight.status).toBe(400);
  });

  test('no Host header at all is refused by the HTTP layer', async () => {
    expect((await withHost(s, 'GET', '/healthz', null)).status).toBe(400);
  });

  test('absolute-form targets route by their path, under the Host header', async () => {
    expect((await withHost(s, 'GET', 'http://other.example/healthz', 'x')).status).toBe(200);
    expect((await withHost(s, 'GET', 'http://other.example/zz/healthz', 'x')).status).toBe(404);
  });

  test.if(ON_SOURCE)('the request log records the path the router served', async () => {
    const logged = await startServer(engine, { env: { BASALT_LOG_LEVEL: 'info' } });
    const lines: string[] = [];
    const write = process.stdout.write;
    process.stdout.write = ((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    try {
      await withHost(logged, 'GET', '/zz/healthz?probe=routing-log', 'x');
      await withHost(logged, 'GET', '/healthz?probe=routing-log', 'x');
    } finally {
      process.stdout.write = write;
      await logged.stop();
    }
    const requests = lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes('"request"') && l.includes('"path"'))
      .map((l) => JSON.parse(l) as { path: string; status: number });
    expect(requests.map((l) => [l.path, l.status])).toEqual([
      ['/zz/healthz', 404],
      ['/healthz', 200],
    ]);
  });

  test('the server keeps serving after every refusal', async () => {
    expect((await fetch(s.url + '/healthz')).status).toBe(200);
  });
});

describe('pathOf', () => {
  test.each([
    ['http://x/zz/api/v1/db/query?a=1', '/zz/api/v1/db/query'],
    ['http://x/healthz', '/healthz'],
    ['http://x/', '/'],
    ['http://x', '/'],
    ['http://[::1]:80/a#b', '/a'],
    ['http://longer.example:5000/api/docs?x#y', '/api/docs'],
    // Bun's form when it could not use the Host header: the bare request target.
    ['/zz/healthz?q=1', '/zz/healthz'],
    ['/', '/'],
  ])('%s → %s', (url, path) => {
    expect(pathOf(url)).toBe(path);
  });
});
