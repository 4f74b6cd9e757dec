/** How a statement or a batch runs on a wire path (src/db/embedded-wire.ts, src/db/wire/connection.ts). */
export interface WireOptions {
  /**
   * It runs inside a transaction opened by BEGIN (external: on a reserved connection; embedded:
   * PGlite's transaction lock held already): a statement gone stale is not run again (its error
   * aborted the transaction), and on the embedded engine nothing is synced after it.
   */
  readonly inTransaction?: boolean;
  /** The most row bytes the answer may hold (`WaitOptions.maxAnswerBytes`); 0 or none: no bound. */
  readonly maxAnswerBytes?: number;
}

/** No options: outside a transaction, no bound (one object for every call that has none). */
export const NO_OPTIONS: WireOptions = Object.freeze({});
