/**
 * What `basalt serve` does with an error nothing caught (docs/operations.md, "When the database
 * drops connections"): without a handler Bun prints it and exits, so one driver promise nobody
 * awaited, rejected because the database ended a connection, would stop every request.
 *
 * - A rejected promise whose reason is a database error (the connection was lost: "database
 *   unavailable", or PostgreSQL refused a statement) is logged and the process keeps serving:
 *   it is the driver's own work on a connection it has already let go of (or a statement that
 *   failed whole), so nothing of the process's state depended on it.
 * - Anything else (an unhandled rejection of another kind, every uncaught exception: a throw
 *   out of a callback that may have left anything half done) is logged and the process exits
 *   with status 1, for its supervisor to start it again: a state nobody understands is not
 *   served from.
 */
import { DatabaseUnavailableError, normalizeDbError, PgError } from './db/engine';
import type { Logger } from './log';

/** Whether an unhandled rejection with `reason` is one the process survives. */
export function survivable(reason: unknown): boolean {
  const e = normalizeDbError(reason);
  return e instanceof DatabaseUnavailableError || e instanceof PgError;
}

export interface Guard {
  onRejection(reason: unknown): void;
  onException(error: unknown): void;
  /** Remove the handlers. */
  remove(): void;
}

/** Install the handlers on `process`; `exit` ends the process (tests pass their own). */
export function guardProcess(log: Logger, exit: (code: number) => void = (code) => process.exit(code)): Guard {
  const onRejection = (reason: unknown) => {
    if (survivable(reason)) {
      log.error('unhandled database error; still serving', { cause: reason });
      return;
    }
    log.error('unhandled rejection; exiting for the supervisor to restart the process', { cause: reason });
    exit(1);
  };
  const onException = (error: unknown) => {
    log.error('uncaught exception; exiting for the supervisor to restart the process', { cause: error });
    exit(1);
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return {
    onRejection,
    onException,
    remove: () => {
      process.off('unhandledRejection', onRejection);
      process.off('uncaughtException', onException);
    },
  };
}
