/**
 * Keeps the embedded engine (PGlite) consistent when a JavaScript exception is thrown
 * from inside the PostgreSQL WebAssembly — in practice the JS engine's own call-stack
 * limit (`RangeError: Maximum call stack size exceeded`), which a recursive parser in
 * PostgreSQL (jsonb input nested some thousands of levels) reaches before PostgreSQL's
 * `check_stack_depth()` does: that guard measures the WebAssembly shadow stack, which
 * such recursion hardly uses, while the frames themselves live on the JS engine's
 * native stack (docs/operations.md, "Limits and bad input").
 *
 * Without this guard the exception unwinds through PostgreSQL's C frames without its
 * error handling running; PGlite's message loop catches it and carries on as if the
 * statement had succeeded (no error, no rows), leaving `error_context_stack` pointing
 * into the abandoned frame. The next `ereport(ERROR)` — any error, e.g. a NUL byte in a
 * text parameter — walks that dangling chain and loops forever inside the WebAssembly,
 * on the JS thread: no request, health check or signal handler runs again.
 *
 * The guard wraps PGlite's loop step: on such an exception it restores PostgreSQL's
 * error-handling globals to their between-messages values and raises a real ERROR
 * (SQLSTATE 54001, "stack depth limit exceeded", as PostgreSQL itself and an external
 * server answer), so PostgreSQL's own recovery runs: the error reaches the caller, the
 * transaction is aborted and the session stays usable.
 */

/** The PGlite internals the guard touches (an Emscripten module). */
interface PgMod {
  _PostgresMainLoopOnce: () => void;
  _errstart: (elevel: number, domain: number) => number;
  _errcode: (sqlstate: number) => number;
  _errmsg: (fmt: number, va: number) => number;
  _errfinish: (file: number, line: number, func: number) => void;
  _malloc: (n: number) => number;
  _error_context_stack: number | { value: number };
  _PG_exception_stack: number | { value: number };
  HEAPU8: Uint8Array;
  /** The WebAssembly memory: its buffer is current even after the heap grew. */
  wasmMemory?: WebAssembly.Memory;
  stackSave: () => number;
  stackRestore: (sp: number) => void;
}

const ERROR = 21; // elog.h
const sixbit = (c: string) => (c.charCodeAt(0) - 48) & 0x3f;
/** MAKE_SQLSTATE('5','4','0','0','1'): statement too complex / stack depth limit exceeded. */
const STACK_DEPTH_SQLSTATE = [...'54001'].reduce((acc, c, i) => acc + sixbit(c) * 2 ** (6 * i), 0);

/** How many times the guard has recovered the engine (for tests and logs). */
export interface GuardState {
  recoveries: number;
  lastError?: string;
}

const addr = (v: number | { value: number }) => (typeof v === 'number' ? v : v.value);

/**
 * Install the guard on a ready PGlite instance (between messages: no statement running) whose
 * internals were checked (checkPgliteInternals, src/db/pglite-internals.ts, lists what the
 * guard needs), so an upgrade that changes them fails at start-up rather than silently losing
 * the guard.
 */
export function installEmbeddedGuard(pg: unknown, onRecover?: (err: unknown) => void): GuardState {
  const mod = (pg as { mod: PgMod }).mod;
  const ctxAddr = addr(mod._error_context_stack);
  const excAddr = addr(mod._PG_exception_stack);
  const view = () => new DataView(mod.wasmMemory?.buffer ?? mod.HEAPU8.buffer);
  // Between messages: no error context, and the exception stack is PostgresMain's own.
  const restCtx = view().getUint32(ctxAddr, true);
  const restExc = view().getUint32(excAddr, true);

  const cstr = (s: string) => {
    const bytes = new TextEncoder().encode(s + '\0');
    const p = mod._malloc(bytes.length);
    mod.HEAPU8.set(bytes, p);
    return p;
  };
  const msg = cstr('stack depth limit exceeded');
  const file = cstr('basalt-embedded-guard');
  const func = cstr('installEmbeddedGuard');

  const state: GuardState = { recoveries: 0 };
  const step = mod._PostgresMainLoopOnce;
  mod._PostgresMainLoopOnce = () => {
    const sp = mod.stackSave();
    try {
      return step();
    } catch (e) {
      // PostgreSQL's own ERROR longjmp arrives as Emscripten's ExitStatus: PGlite handles it.
      if ((e as { name?: string })?.name === 'ExitStatus' || typeof (e as { status?: unknown })?.status === 'number')
        throw e;
      // An abort (a PostgreSQL PANIC) or a trap is not recoverable: src/db/embedded.ts stops the engine.
      if (e instanceof WebAssembly.RuntimeError) throw e;
      state.recoveries++;
      state.lastError = String((e as Error)?.message ?? e);
      onRecover?.(e);
      mod.stackRestore(sp);
      const v = view();
      v.setUint32(ctxAddr, restCtx, true);
      v.setUint32(excAddr, restExc, true);
      // Raise a real ERROR: errfinish longjmps (PGlite: ExitStatus 100), PGlite then runs
      // PostgreSQL's recovery (abort the transaction, report the error, skip to Sync).
      mod._errstart(ERROR, 0);
      mod._errcode(STACK_DEPTH_SQLSTATE);
      mod._errmsg(msg, 0);
      mod._errfinish(file, 0, func);
      throw e; // not reached: errfinish does not return for ERROR
    }
  };
  return state;
}
