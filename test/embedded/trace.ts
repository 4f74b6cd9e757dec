/**
 * The kernel's view of the executable's writes and syncs, for the durability suites: `strace`
 * (`-f -ttt -T -y`, buffers printed whole) started with the server or attached to it, and its
 * log read back as calls with their file, start and end times, and, for writes, their bytes.
 */
import { readFileSync } from 'node:fs';

export const hasStrace = Bun.spawnSync(['strace', '-V']).exitCode === 0;

/** The calls traced: writes (with their buffers) and syncs. */
export const TRACED = 'trace=pwrite64,pwritev,pwritev2,write,writev,sendto,sendmsg,fsync,fdatasync';

/** strace's options for a log `parseTrace` reads. */
export function straceArgs(out: string): string[] {
  return ['strace', '-f', '-qq', '-ttt', '-T', '-y', '-s', '4194304', '-e', TRACED, '-o', out];
}

/** A returned call's end: `) = result`, an errno's name and text, ` <duration>` (-T); anchored, so a buffer cannot match it. */
const TAIL = /\)\s+=\s+(-?\d+)(?:\s+[A-Z0-9]+\s+\([^()]*\))?\s+<(\d+\.\d+)>$/;

export interface Call {
  name: string;
  /** The file of the first argument (`-y`), when it is a descriptor of a path. */
  path?: string;
  /** The arguments as strace printed them (buffers C-escaped). */
  args: string;
  start: number;
  end: number;
  result: number;
}

/** Every call of the log that returned (a call cut off by SIGKILL is left out), in order of return. */
export function parseTrace(file: string): Call[] {
  const calls: Call[] = [];
  const open = new Map<string, { name: string; args: string; start: number }>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^(\d+)\s+(\d+\.\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const [, pid, at, rest] = m as unknown as [string, string, string, string];
    const time = Number(at);
    const resumed = /^<\.\.\. (\w+) resumed>(.*)$/.exec(rest);
    if (resumed) {
      const o = open.get(pid);
      open.delete(pid);
      const r = TAIL.exec(resumed[2]!);
      if (o && r) calls.push(call(o.name, o.args, o.start, time, Number(r[1])));
      continue;
    }
    const c = /^(\w+)\((.*)$/.exec(rest);
    if (!c) continue;
    if (c[2]!.endsWith('<unfinished ...>')) {
      open.set(pid, { name: c[1]!, args: c[2]!.slice(0, -'<unfinished ...>'.length).trimEnd(), start: time });
      continue;
    }
    const r = TAIL.exec(c[2]!);
    if (!r) continue;
    calls.push(call(c[1]!, c[2]!.slice(0, r.index), time, time + Number(r[2]), Number(r[1])));
  }
  return calls.sort((a, b) => a.end - b.end);
}

function call(name: string, args: string, start: number, end: number, result: number): Call {
  const p = /^\d+<([^>]*)>/.exec(args);
  return { name, args, start, end, result, ...(p ? { path: p[1] } : {}) };
}

export const isSync = (c: Call) => (c.name === 'fsync' || c.name === 'fdatasync') && c.result === 0;
export const isWalSegment = (c: Call) => c.path !== undefined && /\/pg_wal\/[0-9A-F]{24}$/.test(c.path);

/** A `pwrite64`'s buffer and offset: `pwrite64(fd<path>, "bytes", count, offset)`. */
export function pwriteOf(c: Call): { data: Buffer; offset: number } {
  const open = c.args.indexOf('"');
  let close = open + 1;
  while (close < c.args.length && c.args[close] !== '"') close += c.args[close] === '\\' ? 2 : 1;
  const tail = /^(\.\.\.)?,\s+(\d+),\s+(\d+)$/.exec(c.args.slice(close + 1));
  if (open < 0 || !tail || tail[1]) throw new Error(`cannot read the pwrite64 buffer: ${c.args.slice(0, 200)}`);
  const data = unescapeC(c.args.slice(open + 1, close));
  if (data.length !== Number(tail[2])) throw new Error(`pwrite64 buffer of ${data.length} bytes, count ${tail[2]}`);
  return { data, offset: Number(tail[3]) };
}

/** strace's C escapes (`\n`, `\"`, `\\`, octal `\NNN`) back to bytes. */
function unescapeC(s: string): Buffer {
  const out = Buffer.allocUnsafe(s.length);
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    if (ch !== 0x5c) {
      out[n++] = ch;
      continue;
    }
    const e = s[++i]!;
    const simple: Record<string, number> = { n: 10, t: 9, r: 13, v: 11, f: 12, '"': 34, '\\': 92 };
    if (e in simple) out[n++] = simple[e]!;
    else {
      let j = i;
      while (j < i + 3 && j < s.length && s[j]! >= '0' && s[j]! <= '7') j++;
      out[n++] = Number.parseInt(s.slice(i, j), 8);
      i = j - 1;
    }
  }
  return out.subarray(0, n);
}
