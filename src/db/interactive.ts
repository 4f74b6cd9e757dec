/**
 * Whether the work running now is interactive: someone waits for its answer (an HTTP
 * request, a command on the management socket), as opposed to a background timer (mail
 * polling, heartbeats, housekeeping). The listener and the management socket mark their
 * work; the wait gate (src/db/wait-gate.ts) lets only interactive platform work ask an idle
 * API transaction to give the database back, so a background poll never ends one.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const scope = new AsyncLocalStorage<true>();

/** Run `fn` (and everything it awaits) as interactive work. */
export function interactive<T>(fn: () => T): T {
  return scope.run(true, fn);
}

export function isInteractive(): boolean {
  return scope.getStore() === true;
}
