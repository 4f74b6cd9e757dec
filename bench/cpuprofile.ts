/**
 * Reading Bun's CPU profiles (`--cpu-prof`, the Chrome `.cpuprofile` format) for bench:profile:
 * the samples inside a time window, each charged to the function on top of the stack (self
 * time), grouped by where that function lives, and turned into CPU microseconds per request.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  /** Wall clock, microseconds since the epoch. */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Self samples per function and per area, inside a window. */
export interface SelfTime {
  samples: number;
  byArea: Map<string, number>;
  byFunction: Map<string, number>;
}

const isWasm = (frame: CallFrame) => frame.functionName.startsWith('.wasm-function') || frame.url.includes('wasm');

/**
 * PGlite's wasm has no name section, so the profiler names its functions `.wasm-function[N]`,
 * N an index of the module's function space (imports first), as an export's index is. Its
 * export section names many of them (`PostgresMainLoopOnce`, `_bt_compare`): index → exported
 * name, read from pglite.wasm.
 */
function wasmExportNames(): Map<number, string> {
  const names = new Map<number, string>();
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(createRequire(import.meta.url).resolve('@electric-sql/pglite/pglite.wasm'));
  } catch {
    return names;
  }
  let at = 8; // magic and version
  const u32 = (): number => {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      const b = bytes[at++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
    }
  };
  const name = (): string => {
    const n = u32();
    at += n;
    return Buffer.from(bytes.subarray(at - n, at)).toString('utf8');
  };
  while (at < bytes.length) {
    const id = bytes[at++]!;
    const size = u32();
    const end = at + size;
    if (id === 7)
      for (let i = u32(); i > 0; i--) {
        const field = name();
        const kind = bytes[at++]!;
        const index = u32();
        // Export indices are of the whole function space, as the profiler's are.
        if (kind === 0 && !names.has(index)) names.set(index, field);
      }
    at = end;
  }
  return names;
}
let wasmNames: Map<number, string> | undefined;

/** A wasm frame's exported name where PGlite exports it, else the profiler's `.wasm-function[N]`. */
function wasmName(functionName: string): string {
  const n = /^\.wasm-function\[(\d+)\]$/.exec(functionName);
  if (!n) return functionName;
  wasmNames ??= wasmExportNames();
  const named = wasmNames.get(Number(n[1]));
  return named ? `${named} (wasm ${n[1]})` : functionName;
}

/**
 * Where a frame's code lives: a package (`elysia`, `@electric-sql/pglite`), a folder of this
 * checkout (`src/modules/database`, `bench/baselines`), `bun built-ins` (builtin:, node:, bun:
 * modules), `wasm` (PGlite's PostgreSQL), or `native` for frames without a script (Bun's and
 * JavaScriptCore's own functions: JSON, Response, crypto, the collector).
 */
export function areaOf(frame: CallFrame, root: string): string {
  const url = frame.url;
  if (isWasm(frame)) return 'wasm';
  if (!url) return 'native';
  if (!url.startsWith('file://') && !url.startsWith('/')) return 'bun built-ins';
  const path = url.replace(/^file:\/\//, '');
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = path.slice(nm + '/node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const rel = path.startsWith(`${root}/`) ? path.slice(root.length + 1) : path;
  const dirs = rel.split('/').slice(0, -1);
  // src/modules/<area>, src/<folder>, bench/<folder>: deep enough to name a layer.
  return dirs.slice(0, dirs[1] === 'modules' ? 3 : 2).join('/') || rel;
}

/** Self samples of `file` between `fromUs` and `toUs` (epoch microseconds). */
export function selfTime(file: string, fromUs: number, toUs: number, root: string): SelfTime {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  /** The nearest caller written in JavaScript with a file (not native, not wasm), for native frames. */
  const caller = (id: number): CallFrame | undefined => {
    for (let up = parent.get(id); up !== undefined; up = parent.get(up)) {
      const f = nodes.get(up)!.callFrame;
      if (f.url && !isWasm(f) && f.url.startsWith('file://')) return f;
    }
    return undefined;
  };
  const out: SelfTime = { samples: 0, byArea: new Map(), byFunction: new Map() };
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const frame = nodes.get(p.samples[i]!)?.callFrame;
    if (!frame) continue;
    let area = areaOf(frame, root);
    // Native work is charged to the layer that asked for it: "native ← src/http".
    if (area === 'native' || area === 'bun built-ins') {
      const by = caller(p.samples[i]!);
      area = `${area} ← ${by ? areaOf(by, root) : '(no caller)'}`;
    }
    const where = frame.url
      ? `${frame.url.replace(`file://${root}/`, '').replace(/^.*\/node_modules\//, '')}:${frame.lineNumber + 1}`
      : '';
    const fnName = isWasm(frame) ? wasmName(frame.functionName) : frame.functionName;
    const fn = `${fnName || '(anonymous)'}${where ? ` ${where}` : ''}`;
    out.samples++;
    out.byArea.set(area, (out.byArea.get(area) ?? 0) + 1);
    out.byFunction.set(fn, (out.byFunction.get(fn) ?? 0) + 1);
  }
  return out;
}

/** Add `b` into `a`. */
export function addSelfTime(a: SelfTime, b: SelfTime): SelfTime {
  a.samples += b.samples;
  for (const [k, v] of b.byArea) a.byArea.set(k, (a.byArea.get(k) ?? 0) + v);
  for (const [k, v] of b.byFunction) a.byFunction.set(k, (a.byFunction.get(k) ?? 0) + v);
  return a;
}

/**
 * Side by side, in CPU microseconds per request: each key's share of its side's samples times
 * that side's measured CPU per request (/proc), so the columns add up to what bench:http
 * compares. Rows sorted by the difference (Basalt − baseline), largest first; `top` rows.
 */
export function compareRows(
  basalt: { self: Map<string, number>; samples: number; usPerRequest: number },
  bare: { self: Map<string, number>; samples: number; usPerRequest: number },
  top: number,
): string[][] {
  const keys = new Set([...basalt.self.keys(), ...bare.self.keys()]);
  const us = (side: typeof basalt, k: string) =>
    ((side.self.get(k) ?? 0) / Math.max(1, side.samples)) * side.usPerRequest;
  return [...keys]
    .map((k) => ({ k, a: us(basalt, k), b: us(bare, k) }))
    .sort((x, y) => y.a - y.b - (x.a - x.b))
    .slice(0, top)
    .map(({ k, a, b }) => [k, a.toFixed(1), b.toFixed(1), (a - b >= 0 ? '+' : '') + (a - b).toFixed(1)]);
}
