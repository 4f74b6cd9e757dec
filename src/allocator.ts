/**
 * How long `basalt serve` leaves freed memory with the allocator before giving it back to the
 * system (docs/operations.md, "Memory and CPU").
 *
 * Bun's allocator (mimalloc) gives freed memory back within about 100 ms. A server under load
 * frees and reuses the same memory all the time (collected strings and rows, the JIT's work), so
 * the same pages go back to the system and are faulted in again, each a system call and a fault:
 * under bench/relations.ts's posts page Basalt gave back several times what the bare baseline did,
 * and on a virtual machine that was a large part of its CPU per request
 * (docs/bench/2026-11-29-allocator-purge.md). With a 10-second delay the memory a server keeps
 * reusing stays; memory left unused 10 seconds still goes back.
 *
 * mimalloc reads its settings from the environment once, when a process starts, and Bun offers
 * no other way to set them; so `serve` replaces itself, before it opens anything, with itself and
 * MIMALLOC_PURGE_DELAY set (execve: the same pid, arguments, environment and open files). That
 * costs a second start of the runtime and the program, about 0.2 s (Bun reads the whole program
 * before it runs any of it, so running again earlier saves little); other commands, short-lived,
 * do not. Written here because no library does this for a Bun executable.
 */
import { readFileSync } from 'node:fs';
import { dlopen, FFIType, ptr } from 'bun:ffi';

/** mimalloc's setting: milliseconds before freed memory goes back to the system. */
export const PURGE_DELAY_VAR = 'MIMALLOC_PURGE_DELAY';
/** The delay `serve` runs with, unless its environment names one. */
export const SERVE_PURGE_DELAY_MS = 10_000;

/**
 * Run this process again with PURGE_DELAY_VAR set, when it is not set (an operator's own value is
 * kept, and the process run again has it). Linux only, where /proc gives the arguments and the
 * environment the process started with, byte for byte. Returns only when nothing was replaced: not
 * Linux, already set, or the C library or the call refused (then the server runs with Bun's default).
 */
export function serveWithPurgeDelay(): void {
  if (process.platform !== 'linux' || process.env[PURGE_DELAY_VAR] !== undefined) return;
  try {
    const argv = nulTerminated(readFileSync('/proc/self/cmdline'));
    const env = nulTerminated(
      Buffer.concat([readFileSync('/proc/self/environ'), Buffer.from(`${PURGE_DELAY_VAR}=${SERVE_PURGE_DELAY_MS}\0`)]),
    );
    const path = new Uint8Array(Buffer.from('/proc/self/exe\0'));
    const libc = dlopen('libc.so.6', {
      execve: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    });
    const argvTable = pointers(argv);
    const envTable = pointers(env);
    libc.symbols.execve(ptr(path), ptr(argvTable), ptr(envTable));
    // Still here: the call failed (e.g. the executable is gone); serve as it is. The strings the
    // tables point into were held until now (the tables hold addresses, not references).
    void [argv, env, path];
    libc.close();
  } catch {
    // No glibc (musl), no /proc: serve with the runtime's default.
  }
}

/** `block` (strings each ended by a NUL, as /proc gives them) in memory of its own. */
function nulTerminated(block: Buffer): Uint8Array {
  const out = new Uint8Array(block.length + (block.length && block[block.length - 1] !== 0 ? 1 : 0));
  out.set(block);
  return out;
}

/** A NULL-ended table of pointers to each string of `block` (C's `char *const []`). */
function pointers(block: Uint8Array): BigUint64Array {
  const base = ptr(block);
  const starts: number[] = [];
  for (let i = 0; i < block.length; i++) if (i === 0 || block[i - 1] === 0) starts.push(i);
  const table = new BigUint64Array(starts.length + 1);
  for (let i = 0; i < starts.length; i++) table[i] = BigInt(base + starts[i]!);
  return table;
}
