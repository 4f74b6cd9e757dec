/**
 * The wait gate's handling of a client that has gone (src/db/wait-gate.ts): a statement's
 * wait reads its signal when its turn comes and at its deadline; a long holder's wait
 * listens to it and leaves the queue at once.
 */
import { describe, expect, test } from 'bun:test';
import { WaitGate } from '../../src/db/wait-gate';
import { DatabaseBusyError, WaitAbandonedError } from '../../src/db/engine';

const held = async (gate: WaitGate) => {
  let release!: () => void;
  const holding = gate.run({ key: 'k' }, () => new Promise<void>((r) => (release = r)));
  await Bun.sleep(0);
  return { release, holding };
};

describe('wait gate: a client that has gone', () => {
  test('a queued statement whose signal aborts never runs: skipped at its turn, counted as abandoned', async () => {
    const gate = new WaitGate({ slots: 1, busyTimeoutMs: () => 5000 });
    const h = await held(gate);
    const ctl = new AbortController();
    let ran = 0;
    const gone = gate.run({ key: 'k', signal: ctl.signal }, async () => void ran++);
    const next = gate.run({ key: 'k' }, async () => 'next');
    ctl.abort();
    // Still queued: nothing listens for the abort.
    expect(gate.stats.abandoned).toBe(0);
    h.release();
    await h.holding;
    expect(await gone.catch((e) => e)).toBeInstanceOf(WaitAbandonedError);
    expect(await next).toBe('next');
    expect(ran).toBe(0);
    expect(gate.stats).toMatchObject({ abandoned: 1, refused: 0 });
  });

  test('at the busy timeout, a statement whose client left is abandoned, one whose client waits is refused', async () => {
    const gate = new WaitGate({ slots: 1, busyTimeoutMs: () => 100 });
    const h = await held(gate);
    const ctl = new AbortController();
    const gone = gate.run({ key: 'k', signal: ctl.signal }, async () => 'ran');
    const waiting = gate.run({ key: 'k' }, async () => 'ran');
    ctl.abort();
    expect(await gone.catch((e) => e)).toBeInstanceOf(WaitAbandonedError);
    const refused = await waiting.catch((e) => e);
    expect(refused).toBeInstanceOf(DatabaseBusyError);
    expect(refused).not.toBeInstanceOf(WaitAbandonedError);
    expect(gate.stats).toMatchObject({ abandoned: 1, refused: 1 });
    h.release();
    await h.holding;
  });

  test('a long holder (a begin) leaves the queue as soon as its signal aborts', async () => {
    const gate = new WaitGate({ slots: 1, busyTimeoutMs: () => 5000 });
    const h = await held(gate);
    const ctl = new AbortController();
    const begin = gate.acquire({ key: 'k', signal: ctl.signal });
    const at = performance.now();
    ctl.abort();
    expect(await begin.catch((e) => e)).toBeInstanceOf(WaitAbandonedError);
    expect(performance.now() - at).toBeLessThan(1000);
    expect(gate.stats.abandoned).toBe(1);
    h.release();
    await h.holding;
  });

  test('a signal already aborted is never queued', async () => {
    const gate = new WaitGate({ slots: 1 });
    const ctl = new AbortController();
    ctl.abort();
    expect(await gate.run({ signal: ctl.signal }, async () => 'ran').catch((e) => e)).toBeInstanceOf(
      WaitAbandonedError,
    );
  });
});
