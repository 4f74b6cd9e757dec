/**
 * Per-request facts established before Elysia sees the request (id, start time,
 * client IP), looked up by the Request object from any handler or guard.
 */
export interface RequestInfo {
  id: string;
  start: number;
  ip: string;
}

const infos = new WeakMap<Request, RequestInfo>();

export function setRequestInfo(req: Request, info: RequestInfo): void {
  infos.set(req, info);
}

export function requestInfo(req: Request): RequestInfo {
  let info = infos.get(req);
  if (!info) {
    // A request that did not come through the listener (e.g. app.handle in a unit test).
    info = { id: crypto.randomUUID(), start: performance.now(), ip: '127.0.0.1' };
    infos.set(req, info);
  }
  return info;
}

/** The client address: the socket peer, or X-Forwarded-For when the peer is a trusted proxy. */
export function clientIp(peer: string, forwardedFor: string | null, trusted: string[]): string {
  if (!forwardedFor || !trusted.includes(peer)) return peer;
  // Walk from the right: the first address not belonging to a trusted proxy is the client.
  const hops = forwardedFor.split(',').map((s) => s.trim()).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) if (!trusted.includes(hops[i]!)) return hops[i]!;
  return hops[0] ?? peer;
}
