/**
 * Per-request facts established before Elysia sees the request (id, start time,
 * client IP), looked up by the Request object from any handler or guard.
 */
import { BlockList, isIP } from 'node:net';
import { NO_AREA, type AreaFacts } from './areas';

export interface RequestInfo {
  id: string;
  start: number;
  ip: string;
  /** The area of the route list (src/app.ts) the request's path belongs to. */
  area: AreaFacts;
  /** Over HTTPS: directly, or `X-Forwarded-Proto: https` from a trusted proxy. */
  https?: boolean;
  /** The API key the guards admitted (src/http/api-key-guard.ts), for the request log. */
  keyId?: string;
  /** The site user the guards admitted (src/http/user-guard.ts), for the request log. */
  userId?: string;
  /** The error the request was answered with (src/http/foundation.ts `answerError`), for the request log. */
  failure?: RequestFailure;
}

/** An error answer as the request log keeps it (docs/logs.md): its code and message, and a 5xx's cause. */
export interface RequestFailure {
  code: string;
  message: string;
  /** What the stdout log recorded as the cause of a 5xx: an Error's name, message and stack. */
  cause?: { name?: string; message: string; stack?: string };
}

/**
 * Where the listener hands each answered request (src/modules/logs/writer.ts): called once per
 * request after the answer is made, so it must only take note; the writing happens elsewhere.
 */
export interface RequestLogSink {
  record(method: string, url: string, path: string, status: number, ms: number, info: RequestInfo): void;
}

/**
 * Where a request carries its facts: a property under a symbol of this module, which nothing
 * else can name. A WeakMap did the same at several times the cost per request, and its entries
 * are extra work for every collection (in process: ~200 ns against ~25 ns for a set and two gets).
 */
const INFO = Symbol('basalt.requestInfo');
type Carrying = Request & { [INFO]?: RequestInfo };

export function setRequestInfo(req: Request, info: RequestInfo): void {
  (req as Carrying)[INFO] = info;
}

export function requestInfo(req: Request): RequestInfo {
  let info = (req as Carrying)[INFO];
  if (!info) {
    // A request that did not come through the listener (e.g. app.handle in a unit test).
    info = { id: crypto.randomUUID(), start: performance.now(), ip: '127.0.0.1', area: NO_AREA };
    (req as Carrying)[INFO] = info;
  }
  return info;
}

/** `::ffff:a.b.c.d` → `a.b.c.d`; brackets and a port dropped; anything else trimmed. */
export function normalizeIp(raw: string): string {
  let a = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(a);
  if (bracketed) a = bracketed[1]!;
  else if (/^\d{1,3}(\.\d{1,3}){3}:\d+$/.test(a)) a = a.slice(0, a.lastIndexOf(':'));
  const mapped = /^::ffff:(\d{1,3}(\.\d{1,3}){3})$/i.exec(a);
  return (mapped ? mapped[1]! : a).toLowerCase();
}

function family(address: string): 'ipv4' | 'ipv6' | undefined {
  const v = isIP(address);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : undefined;
}

/** Parsed web.trusted_proxies, per list object (the setting's value is replaced, never mutated). */
const compiled = new WeakMap<string[], BlockList>();

/** web.trusted_proxies as a BlockList: addresses and CIDR blocks (`10.0.0.0/8`, `fd00::/8`). */
function blocksOf(trusted: string[]): BlockList {
  let blocks = compiled.get(trusted);
  if (!blocks) {
    blocks = new BlockList();
    for (const entry of trusted) {
      const [raw, bits] = entry.trim().split('/') as [string, string | undefined];
      const addr = normalizeIp(raw);
      const fam = family(addr);
      // An entry that is neither an address nor a CIDR block never matches.
      if (!fam) continue;
      if (bits === undefined) blocks.addAddress(addr, fam);
      else if (/^\d{1,3}$/.test(bits) && Number(bits) <= (fam === 'ipv4' ? 32 : 128))
        blocks.addSubnet(addr, Number(bits), fam);
    }
    compiled.set(trusted, blocks);
  }
  return blocks;
}

function isTrusted(address: string, blocks: BlockList): boolean {
  const fam = family(address);
  return !!fam && blocks.check(address, fam);
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
    if (!family(hop)) return nearest;
    if (!isTrusted(hop, blocks)) return hop;
    nearest = hop;
  }
  // Every hop is a trusted proxy: the leftmost is the closest thing to a client.
  return nearest;
}

/**
 * Whether the client reached us over HTTPS: the request URL itself, or — only when the
 * socket peer is a trusted proxy (web.trusted_proxies) — `X-Forwarded-Proto: https`
 * (its first value: the proxy nearest the client wrote it). Anyone else can send the header.
 */
export function cameOverHttps(req: Request, peer: string, trusted: string[]): boolean {
  if (req.url.startsWith('https:')) return true;
  const proto = req.headers.get('x-forwarded-proto');
  if (!proto) return false;
  return proto.split(',')[0]!.trim().toLowerCase() === 'https' && isTrusted(normalizeIp(peer), blocksOf(trusted));
}
