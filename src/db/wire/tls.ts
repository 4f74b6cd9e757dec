/** TLS for a connection of the external wire path (src/db/wire/connection.ts). */
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { connectionError } from './errors';
import type { ResolvedOptions } from './resolved-options';

/**
 * TLS as postgres.js sets it up for the same `ssl` value: SSLRequest, then the handshake on the
 * same socket; `require`, `allow` and `prefer` do not verify the certificate, `verify-full` (or
 * true) does, an object is handed to `tls.connect`. A server without TLS is refused unless the
 * mode is `prefer` or `allow`, which then go on without it.
 */
export async function secure(raw: net.Socket, o: ResolvedOptions): Promise<net.Socket> {
  const answer = once(raw, 'data');
  raw.write(Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])); // SSLRequest (80877103)
  const [first] = (await answer) as [Buffer];
  if (first[0] !== 0x53) {
    if (o.ssl === 'prefer' || o.ssl === 'allow') return raw;
    throw connectionError('ECONNREFUSED', 'the database does not accept TLS connections');
  }
  const host = o.host[0] ?? '';
  const options: tls.ConnectionOptions = { socket: raw, servername: net.isIP(host) ? undefined : host };
  if (o.ssl === 'require' || o.ssl === 'allow' || o.ssl === 'prefer') options.rejectUnauthorized = false;
  else if (typeof o.ssl === 'object' && o.ssl !== null) Object.assign(options, o.ssl);
  const secured = tls.connect(options);
  await once(secured, 'secureConnect');
  return secured;
}
