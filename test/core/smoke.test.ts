import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { expectA } from '../helpers/envelopes';
import { VERSION } from '../../src/version';

describe.each(ENGINES)('platform on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine);
  });
  afterAll(() => s.stop());

  test('health and readiness', async () => {
    expectA(await s.req('GET', '/healthz'), 200, { status: 'ok', version: VERSION });
    expect((await s.req('GET', '/readyz')).body.data).toEqual({ status: 'ready', database: engine });
  });
});
