/**
 * Request smuggling over raw sockets (the probe's cases, kept as a suite): each payload
 * is one request whose body carries a second, complete request. Whatever the framing
 * trick — Content-Length against Transfer-Encoding, duplicate or odd lengths,
 * obfuscated Transfer-Encoding, obs-fold, bare LF — the server must never answer two
 * requests for one, and must keep serving. A plain pipelined pair is the control: it
 * does get two answers, so the count would show a desync.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { rawRequest } from './raw-http';

const SMUGGLED = 'GET /api/v1/public/runtime-config HTTP/1.1\r\nHost: x\r\n\r\n';
const FRONT = 'POST /api/v1/db/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n';
const L = SMUGGLED.length;

/** [name, payload]: each is one request if framed correctly (or refused). */
const CASES: [string, string][] = [
  [
    'CL.TE: Content-Length covers the chunk terminator only',
    `${FRONT}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  ],
  [
    'TE.CL: Content-Length covers everything',
    `${FRONT}Transfer-Encoding: chunked\r\nContent-Length: ${5 + L}\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  ],
  [
    'CL then TE with a zero-length CL',
    `${FRONT}Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  ],
  [
    'duplicate Content-Length, different values',
    `${FRONT}Content-Length: 0\r\nContent-Length: ${L}\r\n\r\n${SMUGGLED}`,
  ],
  ['duplicate Content-Length, other order', `${FRONT}Content-Length: ${L}\r\nContent-Length: 0\r\n\r\n${SMUGGLED}`],
  [
    'duplicate Content-Length, same value (body consumed)',
    `${FRONT}Content-Length: ${L}\r\nContent-Length: ${L}\r\n\r\n${SMUGGLED}`,
  ],
  ['Content-Length list', `${FRONT}Content-Length: 0, ${L}\r\n\r\n${SMUGGLED}`],
  ['Content-Length with a plus sign', `${FRONT}Content-Length: +0\r\n\r\n${SMUGGLED}`],
  ['negative Content-Length', `${FRONT}Content-Length: -1\r\n\r\n${SMUGGLED}`],
  ['hex Content-Length', `${FRONT}Content-Length: 0x0\r\n\r\n${SMUGGLED}`],
  ['Content-Length with trailing junk', `${FRONT}Content-Length: 0 abc\r\n\r\n${SMUGGLED}`],
  ['huge Content-Length', `${FRONT}Content-Length: 99999999999999999999\r\n\r\n${SMUGGLED}`],
  [
    'Transfer-Encoding: xchunked with a Content-Length',
    `${FRONT}Transfer-Encoding: xchunked\r\nContent-Length: ${L}\r\n\r\n${SMUGGLED}`,
  ],
  ['Transfer-Encoding: chunked, identity', `${FRONT}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${SMUGGLED}`],
  ['Transfer-Encoding: identity, chunked', `${FRONT}Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`],
  [
    'Transfer-Encoding with a tab and a Content-Length',
    `${FRONT}Transfer-Encoding:\tchunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  ],
  ['space before the colon', `${FRONT}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`],
  [
    'two Transfer-Encoding headers',
    `${FRONT}Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  ],
  [
    'upper-case CHUNKED with a Content-Length',
    `${FRONT}Transfer-Encoding: CHUNKED\r\nContent-Length: ${5 + L}\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  ],
  [
    'obs-fold hiding Transfer-Encoding',
    `${FRONT}X-Foo: a\r\n Transfer-Encoding: chunked\r\nContent-Length: ${L}\r\n\r\n${SMUGGLED}`,
  ],
  ['obs-fold continuing Content-Length', `${FRONT}Content-Length: 0\r\n ${L}\r\n\r\n${SMUGGLED}`],
  ['obs-fold with a tab', `${FRONT}Content-Length: 0\r\n\t${L}\r\n\r\n${SMUGGLED}`],
  ['bare LF line endings', `POST /api/v1/db/query HTTP/1.1\nHost: x\nContent-Length: 0\n\n${SMUGGLED}`],
  ['bare CR in a header', `${FRONT}X-Foo: a\rContent-Length: 0\r\nContent-Length: ${L}\r\n\r\n${SMUGGLED}`],
  ['chunk size overflow', `${FRONT}Transfer-Encoding: chunked\r\n\r\nffffffffffffffff1\r\nabc\r\n0\r\n\r\n${SMUGGLED}`],
  ['chunk size with a sign', `${FRONT}Transfer-Encoding: chunked\r\n\r\n-0\r\n\r\n${SMUGGLED}`],
  [
    'HTTP/1.0 with Transfer-Encoding',
    `POST /api/v1/db/query HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`,
  ],
  ['NUL in a header value', `${FRONT}X-Foo: a\u0000b\r\nContent-Length: 0\r\n\r\n${SMUGGLED}`],
  ['header line without a colon', `${FRONT}Content-Length ${L}\r\n\r\n${SMUGGLED}`],
  [
    'a GET with a body that is a request',
    `GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: ${L}\r\n\r\n${SMUGGLED}`,
  ],
];

describe.each(ENGINES)('request smuggling on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine);
  });
  afterAll(() => s.stop());

  test('control: two pipelined requests get two answers', async () => {
    const r = await rawRequest(s.publicUrl, `GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n${SMUGGLED}`);
    expect(r.responses.map((x) => x.status)).toEqual([200, 200]);
  });

  test.each(CASES)('%s: at most one answer, and the server keeps serving', async (_name, payload) => {
    const r = await rawRequest(s.publicUrl, payload);
    expect(r.responses.length).toBeLessThanOrEqual(1);
    // Nothing after the first answer: no second status line hiding in the stream either.
    expect(r.text.match(/HTTP\/1\.[01] \d{3}/g)?.length ?? 0).toBeLessThanOrEqual(1);
    // A framing error refused by the HTTP layer (no body) ends the connection: nothing after it is read as a request.
    const first = r.responses[0];
    if (first && first.status >= 400 && first.body === '') expect(r.closed).toBe(true);
    expect((await fetch(s.publicUrl + '/healthz')).status).toBe(200);
  });

  test('a header block over the limit is refused and the server keeps serving', async () => {
    const r = await rawRequest(
      s.publicUrl,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(200_000)}\r\n\r\n`,
    );
    expect(r.responses.length).toBeLessThanOrEqual(1);
    if (r.responses[0]) expect(r.responses[0].status).toBeGreaterThanOrEqual(400);
    expect((await fetch(s.publicUrl + '/healthz')).status).toBe(200);
  });
});
