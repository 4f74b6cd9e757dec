import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';

describe.each(ENGINES)('platform on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine);
  });
  afterAll(() => s.stop());

  test('health and readiness', async () => {
    expect((await s.req('GET', '/healthz')).body).toEqual({ success: true, data: { status: 'ok', version: s.platform.version } });
    expect((await s.req('GET', '/readyz')).body.data).toEqual({ status: 'ready', database: engine });
  });
});
