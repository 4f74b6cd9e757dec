/**
 * The request log (docs/logs.md) over HTTP, on each engine: a user's failing request found by
 * user and path with its error's cause; secret query values redacted; successes past
 * `logs.max_per_second` sampled, with the chart still counting them all; `logs.sample_rate = 0`
 * keeps errors only; retention prunes old rows; rows still waiting in the buffer are written
 * when the server stops on SIGTERM. Read through the admin API, as the panel does.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type Engine } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { adminReq, executableCli, signInAdmin, type AdminAuth } from '../helpers/admin';
import { startAdminServer } from '../admin/support';
import { signInUser, type SignedInUser } from '../helpers/users';
import { createKey, listKeys } from '../helpers/keys';
import { eventually } from '../helpers/wait';
import { LEDGER_MIGRATION } from './fixtures';

/** The ledger (fixtures.ts), and one request log row past retention, one within it, written as an operator's migration would (the retention worker prunes at start). */
const MIGRATION = `${LEDGER_MIGRATION}
INSERT INTO basalt.request_log (at, request_id, method, path, status, duration_ms, area)
VALUES (now() - interval '30 days', 'old-row', 'GET', '/old', 200, 1, 'other'),
       (now() - interval '1 day', 'recent-row', 'GET', '/recent', 200, 1, 'other');
`;

async function rows(s: TestServer, a: AdminAuth, q: Record<string, string>): Promise<any[]> {
  const r = await adminReq(s, a, 'GET', `/api/admin/logs?${new URLSearchParams({ limit: '500', ...q })}`);
  expect(r.status).toBe(200);
  return r.body.data.entries;
}

for (const engine of ENGINES)
  describe(`the request log (${engine})`, () => {
    let s: TestServer;
    let a: AdminAuth;
    let user: SignedInUser;
    beforeAll(async () => {
      s = await startAdminServer(engine, { migrations: { '001_ledger.sql': MIGRATION } });
      a = await signInAdmin(s);
      user = await signInUser(s);
    }, 120_000);
    afterAll(async () => {
      await s?.stop();
    });

    test("a user's failing request is found by user and path, with its cause", async () => {
      const ok = await s.req('POST', '/api/v1/db/query', {
        headers: user.headers({ 'x-forwarded-for': '198.51.100.7' }),
        body: { entity: 'ledger_totals', action: 'select', filters: [{ field: 'id', op: 'eq', value: 1 }] },
      });
      expect(ok.status).toBe(200);
      const failed = await s.req('POST', '/api/v1/db/query', {
        headers: user.headers({ 'x-forwarded-for': '198.51.100.7', 'x-request-id': `ledger-${engine}` }),
        body: { entity: 'ledger_totals', action: 'select' },
      });
      expect(failed.status).toBe(500);
      expect(failed.text).not.toContain('ledger row 13');

      const found = await rows(s, a, { user: user.email, path: '/api/v1/db', status: '5xx' });
      expect(found).toHaveLength(1);
      const e = found[0];
      expect(e).toMatchObject({
        request_id: `ledger-${engine}`,
        method: 'POST',
        path: '/api/v1/db/query',
        status: 500,
        area: 'db',
        user_id: user.user.id,
        user_email: user.email,
        key_id: null,
        ip: '198.51.100.7',
        error: { code: 'internal_error' },
      });
      expect(e.error.cause.message).toContain('ledger row 13 is broken');
      expect(e.duration_ms).toBeGreaterThan(0);
      // All of the user's requests: the success too; by id as well as by e-mail.
      const mine = await rows(s, a, { user: user.user.id, path: '/api/v1/db/query' });
      expect(mine.map((r) => r.status).sort()).toEqual([200, 500]);
      expect(await rows(s, a, { user: 'nobody@example.com' })).toEqual([]);

      const detail = await adminReq(s, a, 'GET', `/api/admin/logs/ledger-${engine}`);
      expect(detail.status).toBe(200);
      expect(detail.body.data.entries[0].error.cause.message).toContain('ledger row 13 is broken');
      const unknown = await adminReq(s, a, 'GET', '/api/admin/logs/no-such-request');
      expect(unknown.status).toBe(404);
      expect(unknown.body.error.code).toBe('not_found');

      // Per minute: the failure counts as an error.
      const chart = await adminReq(s, a, 'GET', `/api/admin/logs/minutes?user=${encodeURIComponent(user.email)}`);
      expect(chart.status).toBe(200);
      const sum = (k: 'requests' | 'errors') => chart.body.data.minutes.reduce((n: number, m: any) => n + m[k], 0);
      expect(sum('requests')).toBe(2);
      expect(sum('errors')).toBe(1);
    });

    test('basalt logs search and show find the same failure (over the management socket when embedded)', async () => {
      const search = await executableCli(s, [
        'logs',
        'search',
        '--user',
        user.email,
        '--status',
        '5xx',
        '--since',
        '1h',
      ]);
      expect(search.code).toBe(0);
      expect(search.stdout).toContain(`id=ledger-${engine}`);
      expect(search.stdout).toContain('internal_error: ledger row 13 is broken');
      const show = await executableCli(s, ['logs', 'show', `ledger-${engine}`]);
      expect(show.code).toBe(0);
      expect(show.stdout).toContain('cause: PgError: ledger row 13 is broken');
      const bad = await executableCli(s, ['logs', 'search', '--status', '6xx']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--status must be one of');
    });

    test("a key's requests carry its id; a bad filter is a 400 naming the field", async () => {
      const key = await createKey(s, { permissions: ['db:query'], tables: ['ledger'] });
      const r = await s.req('POST', '/api/v1/db/query', {
        headers: { 'x-api-key': key, 'x-request-id': `keyed-${engine}` },
        body: { entity: 'ledger', action: 'select' },
      });
      expect(r.status).toBe(200);
      const id = (await listKeys(s)).find((k) => key.startsWith(k.prefix) && key.endsWith(k.last4))!.id;
      const found = await rows(s, a, { key: id });
      expect(found.map((e) => e.request_id)).toEqual([`keyed-${engine}`]);
      expect(found[0]).toMatchObject({ key_id: id, user_id: null, key_label: expect.any(String) });
      const bad = await adminReq(s, a, 'GET', '/api/admin/logs?status=6xx');
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('validation_error');
    });

    test('values of secret query parameters are redacted', async () => {
      const r = await s.req(
        'GET',
        '/api/v1/public/nothing-here?access_token=SECRET-A&code=SECRET-B&apikey=SECRET-C&Password=SECRET-D&page=2&q=plain',
        { headers: { 'x-request-id': `redact-${engine}` } },
      );
      expect(r.status).toBe(404);
      const [e] = await rows(s, a, { path: '/api/v1/public/nothing-here' });
      expect(e.path).toBe(
        '/api/v1/public/nothing-here?access_token=[redacted]&code=[redacted]&apikey=[redacted]&Password=[redacted]&page=2&q=plain',
      );
      expect(JSON.stringify(e)).not.toContain('SECRET');
      expect(e.error.code).toBe('not_found');
    });

    test('retention removes rows older than logs.retention_days', async () => {
      // Both rows came with the migration; the retention worker ran at start.
      const recent = await adminReq(s, a, 'GET', '/api/admin/logs/recent-row');
      expect(recent.status).toBe(200);
      await eventually(async () => (await adminReq(s, a, 'GET', '/api/admin/logs/old-row')).status === 404, {
        what: 'the 30-day-old row pruned',
      });
    });

    test('logs.sample_rate 0 keeps errors only', async () => {
      await adminReq(s, a, 'PUT', '/api/admin/settings/logs.sample_rate', { value: '0' });
      try {
        for (let i = 0; i < 10; i++)
          expect(
            (await s.req('GET', '/healthz', { headers: { 'x-request-id': `sampled-ok-${engine}-${i}` } })).status,
          ).toBe(200);
        expect((await s.req('GET', '/nothing', { headers: { 'x-request-id': `sampled-err-${engine}` } })).status).toBe(
          404,
        );
        // The error sent after the successes is there: so would they be, had they been kept.
        const found = await rows(s, a, { area: 'system' });
        const errs = await rows(s, a, { path: '/nothing' });
        expect(errs.map((e) => e.request_id)).toContain(`sampled-err-${engine}`);
        expect(found.filter((e) => e.request_id.startsWith(`sampled-ok-${engine}`))).toEqual([]);
      } finally {
        await adminReq(s, a, 'DELETE', '/api/admin/settings/logs.sample_rate');
      }
      expect((await s.req('GET', '/healthz', { headers: { 'x-request-id': `kept-ok-${engine}` } })).status).toBe(200);
      expect((await rows(s, a, { area: 'system' })).map((e) => e.request_id)).toContain(`kept-ok-${engine}`);
    });

    // Last here: the burst raises the instance's count of successes a second, and so thins those
    // of the next second or two.
    test('past logs.max_per_second successes are sampled, every error kept, and the chart counts them all', async () => {
      await adminReq(s, a, 'PUT', '/api/admin/settings/logs.max_per_second', { value: 20 });
      const since = new Date(Date.now() - 1000).toISOString();
      const N = 300;
      try {
        for (let i = 0; i < N; i += 50)
          await Promise.all([
            ...Array.from({ length: 50 }, (_, j) =>
              s.req('GET', '/healthz', { headers: { 'x-request-id': `burst-${engine}-${i + j}` } }),
            ),
            s.req('GET', '/nothing', { headers: { 'x-request-id': `burst-err-${engine}-${i}` } }),
          ]);
      } finally {
        await adminReq(s, a, 'DELETE', '/api/admin/settings/logs.max_per_second');
      }
      const healthz = await rows(s, a, { path: '/healthz', since });
      const kept = healthz.filter((e) => e.request_id.startsWith(`burst-${engine}-`));
      // About 20 a second, and more while the burst's first second is thinned as it comes.
      expect(kept.length).toBeGreaterThanOrEqual(20);
      expect(kept.length).toBeLessThan(200);
      const errs = (await rows(s, a, { path: '/nothing', since })).map((e) => e.request_id);
      for (let i = 0; i < N; i += 50) expect(errs).toContain(`burst-err-${engine}-${i}`);
      // Each kept success counts for the requests it stands for: the chart estimates all 300.
      const r = await adminReq(
        s,
        a,
        'GET',
        `/api/admin/logs/minutes?${new URLSearchParams({ path: '/healthz', since })}`,
      );
      expect(r.status).toBe(200);
      const sum = (k: 'requests' | 'kept') => r.body.data.minutes.reduce((n: number, m: any) => n + m[k], 0);
      expect(sum('kept')).toBe(healthz.length);
      expect(sum('requests')).toBeGreaterThan(N / 3);
      expect(sum('requests')).toBeLessThan(N * 3);
    });
  });

describe.each(ENGINES)('the request log at shutdown (%s)', (engine: Engine) => {
  test('rows still in the buffer are written when the server stops on SIGTERM', async () => {
    const db = await freshDb(engine);
    // Every success kept: 300 in a burst is past the default logs.max_per_second.
    const env = { BASALT_LOGS_MAX_PER_SECOND: '0' };
    try {
      const first = await startServer(engine, { db, env });
      const N = 300;
      for (let i = 0; i < N; i += 50)
        await Promise.all(
          Array.from({ length: 50 }, (_, j) =>
            first.req('GET', '/healthz', { headers: { 'x-request-id': `term-${engine}-${i + j}` } }),
          ),
        );
      // Nothing has read the log (a read writes the buffer first): at most a timed batch went out.
      await first.stop();
      const again = await startServer(engine, { db, env });
      try {
        const a = await signInAdmin(again);
        const ids = new Set<string>();
        let before = '';
        for (;;) {
          const r = await adminReq(
            again,
            a,
            'GET',
            `/api/admin/logs?area=system&limit=500${before ? `&before=${before}` : ''}`,
          );
          for (const e of r.body.data.entries) ids.add(e.request_id);
          if (!r.body.data.next_cursor) break;
          before = r.body.data.next_cursor;
        }
        const missing = Array.from({ length: N }, (_, i) => `term-${engine}-${i}`).filter((id) => !ids.has(id));
        expect(missing).toEqual([]);
      } finally {
        await again.stop();
      }
    } finally {
      await db.drop();
    }
  }, 120_000);
});
