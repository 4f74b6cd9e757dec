/**
 * What `basalt serve` does with an error nothing caught (src/process-guard.ts,
 * docs/operations.md "When the database drops connections"): a database error is logged and
 * survived, anything else is logged and exits 1. The handlers are called as the process would;
 * the executable under a real failover: test/database/failover.test.ts.
 */
import { describe, expect, test } from 'bun:test';
import { createLogger, type Logger } from '../../src/log';
import { guardProcess, survivable } from '../../src/process-guard';

/** A logger that keeps its lines (as the JSON it would write). */
function capture(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const base = createLogger(() => 'silent');
  const keep = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, msg, ...fields });
  const log: Logger = {
    ...base,
    debug: keep('debug'),
    info: keep('info'),
    warn: keep('warn'),
    error: keep('error'),
    child: () => log,
  };
  return { log, lines };
}

/** As postgres.js rejects: a terminated backend (57P01), a closed socket, a refused statement. */
const terminated = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
const closed = Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), { code: 'CONNECTION_CLOSED' });
const refused = Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });

describe('the process guard', () => {
  test('database errors are survivable; anything else is not', () => {
    for (const e of [terminated, closed, refused]) expect(survivable(e)).toBe(true);
    for (const e of [
      new TypeError("null is not an object (evaluating 'socket.write')"),
      new Error('x'),
      'text',
      undefined,
    ])
      expect(survivable(e)).toBe(false);
  });

  test('an unhandled database rejection is logged and the process keeps serving', () => {
    const { log, lines } = capture();
    const exits: number[] = [];
    const guard = guardProcess(log, (code) => void exits.push(code));
    try {
      guard.onRejection(terminated);
      guard.onRejection(closed);
    } finally {
      guard.remove();
    }
    expect(exits).toEqual([]);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      ['error', 'unhandled database error; still serving'],
      ['error', 'unhandled database error; still serving'],
    ]);
    expect(lines[0]!.cause).toBe(terminated);
  });

  test('any other unhandled rejection, and every uncaught exception, is logged and exits 1', () => {
    const { log, lines } = capture();
    const exits: number[] = [];
    const guard = guardProcess(log, (code) => void exits.push(code));
    try {
      guard.onRejection(new Error('a bug'));
      guard.onException(Object.assign(new Error('socket gone'), { code: 'ECONNRESET' }));
    } finally {
      guard.remove();
    }
    expect(exits).toEqual([1, 1]);
    expect(lines.map((l) => l.msg)).toEqual([
      'unhandled rejection; exiting for the supervisor to restart the process',
      'uncaught exception; exiting for the supervisor to restart the process',
    ]);
  });

  test('the handlers are on the process while installed, and gone once removed', () => {
    const before = process.listenerCount('unhandledRejection');
    const guard = guardProcess(capture().log, () => {});
    expect(process.listenerCount('unhandledRejection')).toBe(before + 1);
    guard.remove();
    expect(process.listenerCount('unhandledRejection')).toBe(before);
  });
});
