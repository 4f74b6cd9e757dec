/**
 * Every part of a PGlite instance Basalt uses that PGlite does not promise (methods its
 * declarations mark internal or `protected`, its WebAssembly module), with the `typeof` each
 * must have: src/db/embedded-wire.ts speaks the wire protocol through the instance's protocol
 * method and its locks, src/db/embedded.ts hooks the protocol and flushes the WAL through the
 * module, src/db/embedded-guard.ts wraps PostgreSQL's loop step and raises its errors. Checked
 * when the engine opens (`checkPgliteInternals`), so a PGlite upgrade that renames or drops one
 * fails start-up, naming it, rather than a statement later. The module's `onAbort` (a hook
 * Emscripten reads, absent until set) and `wasmMemory` (optional: HEAPU8 serves without it) are
 * not checked. Emscripten's NODEFS, which src/db/embedded-fs.ts patches (`fsync`, `write`,
 * `tryFSOperation`) before PostgreSQL starts, is checked there.
 */
export const PGLITE_INTERNALS = {
  /** On the instance. */
  instance: {
    closed: 'boolean',
    parsers: 'object',
    serializers: 'object',
    execProtocolRawStream: 'function',
    execProtocolRawSync: 'function',
    syncToFs: 'function',
    _runExclusiveQuery: 'function',
    _runExclusiveTransaction: 'function',
    mod: 'object',
  },
  /** On its WebAssembly module (`mod`). */
  module: {
    _PostgresMainLoopOnce: 'function',
    _errstart: 'function',
    _errcode: 'function',
    _errmsg: 'function',
    _errfinish: 'function',
    _malloc: 'function',
    // An address: a number, or a WebAssembly.Global holding it.
    _error_context_stack: 'number|object',
    _PG_exception_stack: 'number|object',
    HEAPU8: 'object',
    stackSave: 'function',
    stackRestore: 'function',
    _XLogFlush: 'function',
    _GetFlushRecPtr: 'function',
  },
} as const;

function lacking(of: unknown, expected: Record<string, string>, prefix: string): string[] {
  const o = (of ?? {}) as Record<string, unknown>;
  return Object.entries(expected)
    .filter(([name, type]) => !type.split('|').includes(typeof o[name]))
    .map(([name, type]) => `${prefix}${name} (${type}, found ${typeof o[name]})`);
}

/** Throw, naming each, when `pg` lacks a part of PGLITE_INTERNALS or has it of another type. */
export function checkPgliteInternals(pg: unknown): void {
  const missing = [
    ...lacking(pg, PGLITE_INTERNALS.instance, ''),
    ...lacking((pg as { mod?: unknown } | null)?.mod, PGLITE_INTERNALS.module, 'mod.'),
  ];
  if (missing.length > 0)
    throw new Error(
      `embedded engine: this PGlite build lacks what Basalt uses of it (src/db/pglite-internals.ts): ${missing.join(', ')}`,
    );
}
