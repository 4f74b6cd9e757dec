/**
 * Raw HTTP/1.1 over a socket (node:net), for what fetch cannot send: odd Host headers,
 * conflicting framing headers, obs-fold, bytes after a body. Returns every byte the
 * server sent until it closed the connection or went quiet.
 */
import net from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface RawResult {
  /** Everything received, as latin1 text. */
  text: string;
  /** The responses found in it, in order. */
  responses: RawResponse[];
  /** True when the server closed the connection (rather than the wait ending). */
  closed: boolean;
}

/** Send `payload` on a fresh connection to `url`'s host and port; wait until close or `quietMs` of silence. */
export function rawRequest(url: string, payload: string | Uint8Array, quietMs = 700): Promise<RawResult> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let closed = false;
    let timer: ReturnType<typeof setTimeout>;
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ text, responses: parseResponses(text), closed });
    };
    const quiet = () => {
      clearTimeout(timer);
      timer = setTimeout(done, quietMs);
    };
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(payload);
      quiet();
    });
    socket.on('data', (b: Buffer) => {
      chunks.push(b);
      quiet();
    });
    socket.on('close', () => {
      closed = true;
      done();
    });
    socket.on('error', () => {});
  });
}

/** Split a byte stream into HTTP/1.x responses (Content-Length or chunked bodies). */
export function parseResponses(text: string): RawResponse[] {
  const out: RawResponse[] = [];
  let at = 0;
  while (at < text.length) {
    const end = text.indexOf('\r\n\r\n', at);
    if (end === -1 || !text.startsWith('HTTP/1.', at)) break;
    const lines = text.slice(at, end).split('\r\n');
    const status = Number(lines[0]!.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let bodyStart = end + 4;
    let body = '';
    if (headers['transfer-encoding']?.includes('chunked')) {
      for (;;) {
        const lineEnd = text.indexOf('\r\n', bodyStart);
        if (lineEnd === -1) break;
        const size = parseInt(text.slice(bodyStart, lineEnd), 16);
        bodyStart = lineEnd + 2;
        if (!size) {
          bodyStart += 2;
          break;
        }
        body += text.slice(bodyStart, bodyStart + size);
        bodyStart += size + 2;
      }
    } else {
      const length = Number(headers['content-length'] ?? 0);
      body = text.slice(bodyStart, bodyStart + length);
      bodyStart += length;
    }
    out.push({ status, headers, body });
    at = bodyStart;
  }
  return out;
}

/** A request with CRLF line endings; `Connection: close` unless the headers say otherwise. */
export function requestText(method: string, target: string, headers: [string, string][], body = ''): string {
  const lines = [`${method} ${target} HTTP/1.1`, ...headers.map(([k, v]) => `${k}: ${v}`)];
  if (!headers.some(([k]) => k.toLowerCase() === 'connection')) lines.push('Connection: close');
  return lines.join('\r\n') + '\r\n\r\n' + body;
}
