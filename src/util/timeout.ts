/**
 * The one timeout helper: race a piece of work against a timer that is always cleared,
 * whichever finishes first. The work itself is not cancelled; it just stops being waited for.
 */

const LATE = Symbol('late');

/** `work`'s outcome, or LATE when `ms` passed first. */
async function race<T>(work: PromiseLike<T>, ms: number): Promise<T | typeof LATE> {
  let timer: Timer | undefined;
  const late = new Promise<typeof LATE>((resolve) => (timer = setTimeout(() => resolve(LATE), ms)));
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `work`'s result (or its rejection); once `ms` pass first, a rejection with `message`. */
export async function withTimeout<T>(
  work: PromiseLike<T>,
  ms: number,
  message = `no answer within ${ms} ms`,
): Promise<T> {
  const r = await race(work, ms);
  if (r === LATE) throw new Error(message);
  return r;
}

/** True when `work` settled within `ms`, false when the time ran out first; a rejection of `work` passes through. */
export async function within(work: PromiseLike<unknown>, ms: number): Promise<boolean> {
  return (await race(work, ms)) !== LATE;
}
