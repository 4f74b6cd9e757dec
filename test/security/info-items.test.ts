/**
 * The review's info items (docs/operations.md "Health"; docs/configuration.md "Runtime
 * config"; docs/admin-api.md §Mail jobs): `/metrics` is served to this machine only by
 * default (`web.metrics_access`); runtime config never writes an untrusted Host header into
 * its base URLs; a mail jobs cursor that is not one is a 400, not a silent first page. (The
 * backup interval's minimum is in settings-safety.test.ts and test/backup/schedule.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { adminReq, executableCli, signInAdmin, type AdminAuth } from '../helpers/admin';
import { eventually } from '../helpers/wait';
import { startAdminServer } from '../admin/support';
import { expectAError } from '../helpers/envelopes';
import { rawRequest, requestText } from './raw-http';

describe.each(ENGINES)('info items on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  beforeAll(async () => {
    s = await startAdminServer(engine, { env: { BASALT_WEB_PUBLIC_API_SEPARATE: 'true' } });
    a = await signInAdmin(s);
  }, 180_000);
  afterAll(() => s.stop());

  const metrics = (from?: string) =>
    fetch(`${s.url}/metrics`, { headers: from ? { 'x-forwarded-for': from } : {} }).then(async (r) => ({
      status: r.status,
      body: r.headers.get('content-type')?.startsWith('application/json') ? await r.json() : await r.text(),
    }));

  /**
   * An operator-only setting changed where the process runs (`basalt settings set|unset`): in
   * process, or with the executable's own command line; the server takes it up live.
   */
  const operatorSetting = async (key: string, value?: string) => {
    if (s.target === 'source') {
      if (value === undefined) await s.platform.settings.unset(key);
      else await s.platform.settings.set(key, value);
      await s.platform.settings.load();
      return;
    }
    const r = await executableCli(
      s,
      value === undefined ? ['settings', 'unset', key] : ['settings', 'set', key, value],
    );
    expect([r.code, r.stderr]).toEqual([0, '']);
  };
  /** /metrics from `from` once it answers `status` (a setting changed by another process arrives by notification). */
  const metricsOnce = (status: number, from?: string) =>
    eventually(() => metrics(from), { until: (r) => r.status === status, timeout: 5000, what: `/metrics ${status}` });

  test('/metrics: loopback clients by default; another address 403; open serves it; off is 404', async () => {
    const local = await metrics();
    expect(local.status).toBe(200);
    expect(local.body).toContain('basalt_http_requests_total');
    // Through the trusted proxy (127.0.0.1) for an outside client: refused, saying why.
    expectAError(await metrics('198.51.100.7'), 403, 'forbidden', {
      message: '/metrics is served to clients on this machine only (web.metrics_access).',
    });
    expect((await metrics('127.0.0.1')).status).toBe(200);
    await operatorSetting('web.metrics_access', 'open');
    expect((await metricsOnce(200, '198.51.100.7')).status).toBe(200);
    await operatorSetting('web.metrics_access', 'off');
    expectAError(await metricsOnce(404), 404, 'not_found');
    await operatorSetting('web.metrics_access');
    expect((await metricsOnce(200)).status).toBe(200);
  });

  const runtimeConfig = async (host: string) => {
    const r = await rawRequest(s.publicUrl, requestText('GET', '/api/v1/public/runtime-config', [['Host', host]]));
    expect(r.responses[0]!.status).toBe(200);
    return JSON.parse(r.responses[0]!.body).data as { api_base_url: string; main_api_base_url: string };
  };

  test('runtime config does not echo an arbitrary Host: the listeners’ own addresses instead', async () => {
    const d = await runtimeConfig('evil.example');
    expect(d.api_base_url).toBe(`${s.publicUrl}/api`);
    expect(d.main_api_base_url).toBe(`${s.url}/api`);
    expect(JSON.stringify(d)).not.toContain('evil');
  });

  test('a trusted request origin is kept: loopback names, and origins in web.cors_origins', async () => {
    const pub = new URL(s.publicUrl).port;
    const main = new URL(s.url).port;
    expect(await runtimeConfig(`localhost:${pub}`)).toMatchObject({
      api_base_url: `http://localhost:${pub}/api`,
      main_api_base_url: `http://localhost:${main}/api`,
    });
    await s.settings.set('web.cors_origins', ['http://api.example.com']);
    try {
      expect(await runtimeConfig('api.example.com')).toMatchObject({ api_base_url: 'http://api.example.com/api' });
    } finally {
      await s.settings.unset('web.cors_origins');
    }
  });

  test('mail jobs: a cursor that is not one → 400 naming `before`; a real one pages', async () => {
    for (const before of ['garbage', '2026-01-01T00:00:00Z', 'not-a-date|00000000-0000-0000-0000-000000000000'])
      expectAError(
        await adminReq(s, a, 'GET', `/api/admin/mail/jobs?before=${encodeURIComponent(before)}`),
        400,
        'validation_error',
        { details: { fields: { before: expect.stringContaining('next_cursor') } } },
      );
    const cursor = encodeURIComponent('2026-01-01T00:00:00.000Z|00000000-0000-0000-0000-000000000000');
    const ok = await adminReq(s, a, 'GET', `/api/admin/mail/jobs?before=${cursor}`);
    expect(ok.status).toBe(200);
    expect(ok.body.data).toEqual({ jobs: [], next_cursor: null });
  });
});
