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

/** One address as a number and its family, or undefined when it is not an IP address. */
type Parsed = { v6: boolean; n: bigint };

/** `::ffff:a.b.c.d` → `a.b.c.d`; brackets and a port dropped; anything else trimmed. */
export function normalizeIp(raw: string): string {
  let a = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(a);
  if (bracketed) a = bracketed[1]!;
  else if (/^\d{1,3}(\.\d{1,3}){3}:\d+$/.test(a)) a = a.slice(0, a.lastIndexOf(':'));
  const mapped = /^::ffff:(\d{1,3}(\.\d{1,3}){3})$/i.exec(a);
  return (mapped ? mapped[1]! : a).toLowerCase();
}

function parseV4(a: string): bigint | undefined {
  const parts = a.split('.');
  if (parts.length !== 4 || !parts.every((x) => /^\d{1,3}$/.test(x) && Number(x) <= 255)) return undefined;
  return parts.reduce((n, x) => (n << 8n) | BigInt(x), 0n);
}

function parseV6(a: string): bigint | undefined {
  if (!/^[0-9a-f:.]+$/.test(a) || a.split('::').length > 2) return undefined;
  // An embedded IPv4 tail (e.g. 64:ff9b::1.2.3.4) is rewritten as its two groups.
  const v4 = /(\d{1,3}(\.\d{1,3}){3})$/.exec(a);
  if (v4) {
    const n = parseV4(v4[1]!);
    if (n === undefined) return undefined;
    a = `${a.slice(0, -v4[1]!.length)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, rest] = a.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = rest ? rest.split(':') : [];
  const missing = 8 - left.length - right.length;
  if (rest === undefined ? missing !== 0 : missing < 1) return undefined;
  const groups = [...left, ...Array(rest === undefined ? 0 : missing).fill('0'), ...right];
  if (!groups.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return undefined;
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

function parseIp(raw: string): Parsed | undefined {
  const a = normalizeIp(raw);
  const v4 = parseV4(a);
  if (v4 !== undefined) return { v6: false, n: v4 };
  const v6 = a.includes(':') ? parseV6(a) : undefined;
  return v6 === undefined ? undefined : { v6: true, n: v6 };
}

/** A trusted-proxy entry: one address or a CIDR block (`10.0.0.0/8`, `fd00::/8`). */
interface Block {
  v6: boolean;
  net: bigint;
  mask: bigint;
}

function parseBlock(entry: string): Block | undefined {
  const [addr, bits] = entry.trim().split('/') as [string, string | undefined];
  const ip = parseIp(addr);
  if (!ip) return undefined;
  const width = ip.v6 ? 128 : 32;
  const prefix = bits === undefined ? width : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (!(prefix >= 0 && prefix <= width)) return undefined;
  const all = (1n << BigInt(width)) - 1n;
  const mask = all ^ ((1n << BigInt(width - prefix)) - 1n);
  return { v6: ip.v6, net: ip.n & mask, mask };
}

/** Parsed web.trusted_proxies, per list object (the setting's value is replaced, never mutated). */
const compiled = new WeakMap<string[], Block[]>();

function blocksOf(trusted: string[]): Block[] {
  let blocks = compiled.get(trusted);
  if (!blocks) {
    // An entry that is neither an address nor a CIDR block never matches.
    blocks = trusted.map(parseBlock).filter((b): b is Block => b !== undefined);
    compiled.set(trusted, blocks);
  }
  return blocks;
}

function isTrusted(address: string, blocks: Block[]): boolean {
  const ip = parseIp(address);
  return !!ip && blocks.some((b) => b.v6 === ip.v6 && (ip.n & b.mask) === b.net);
}

/**
 * The client address: the socket peer, or — when the peer is a trusted proxy
 * (web.trusted_proxies: addresses or CIDR blocks) — the X-Forwarded-For hop nearest
 * to us that is not itself a trusted proxy. Only the right end of the header was
 * written by our proxies; anything to its left came from the client and may be forged.
 * Addresses are normalized (`::ffff:1.2.3.4` → `1.2.3.4`), so one client has one key.
 */
export function clientIp(peer: string, forwardedFor: string | null, trusted: string[]): string {
  const from = normalizeIp(peer);
  const blocks = blocksOf(trusted);
  if (!forwardedFor || !isTrusted(from, blocks)) return from;
  const hops = forwardedFor.split(',').map(normalizeIp).filter(Boolean);
  let nearest = from;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    // A hop that is not an address (e.g. "unknown") ends the walk: the last trusted address is all we know.
    if (!parseIp(hop)) return nearest;
    if (!isTrusted(hop, blocks)) return hop;
    nearest = hop;
  }
  // Every hop is a trusted proxy: the leftmost is the closest thing to a client.
  return nearest;
}
