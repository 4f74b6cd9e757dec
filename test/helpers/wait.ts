/**
 * The one polling helper of the suites: ask again until the answer is the awaited one,
 * and fail with what was awaited and the last answer when it does not come in time.
 *
 * `fn` is done when it returns without throwing and
 *  - with `until`: `until(value)` holds;
 *  - without: the value is not `false` (so a boolean condition and an `expect(...)`
 *    assertion both work: a failed assertion throws, and is asked again).
 * The value of the last call is returned.
 *
 * @example
 * await eventually(() => existsSync(sock()), { what: 'the socket' });
 * const r = await eventually(() => me(b, token), { until: (r) => r.status !== 200, what: 'B to refuse the token', timeout: 2000 });
 * await eventually(async () => expect((await me(b, token)).status).toBe(401));
 */
export interface EventuallyOptions<T> {
  /** Give up after this many milliseconds (default 10 000). */
  timeout?: number;
  /** Pause between two calls, in milliseconds (default 25). */
  interval?: number;
  /** What is awaited, for the failure message (a function: built only when it fails). */
  what?: string | (() => string);
  /** When the value is the awaited one (default: anything but `false`). */
  until?: (value: T) => boolean;
}

export async function eventually<T>(fn: () => T | Promise<T>, opts: EventuallyOptions<T> = {}): Promise<T> {
  const timeout = opts.timeout ?? 10_000;
  const interval = opts.interval ?? 25;
  const done = opts.until ?? ((v: T) => v !== false);
  const end = Date.now() + timeout;
  for (;;) {
    let last: { value: T } | { error: unknown };
    try {
      const value = await fn();
      if (done(value)) return value;
      last = { value };
    } catch (error) {
      last = { error };
    }
    if (Date.now() >= end) {
      const what = (typeof opts.what === 'function' ? opts.what() : opts.what) ?? 'the condition';
      if ('error' in last) {
        const e = last.error instanceof Error ? last.error : new Error(String(last.error));
        e.message = `timed out after ${timeout} ms waiting for ${what}: ${e.message}`;
        throw e;
      }
      throw new Error(`timed out after ${timeout} ms waiting for ${what}; last value: ${show(last.value)}`);
    }
    await Bun.sleep(Math.max(0, Math.min(interval, end - Date.now())));
  }
}

function show(v: unknown): string {
  try {
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s.length > 2000 ? s.slice(0, 2000) + '…' : s;
  } catch {
    return String(v);
  }
}
