/**
 * Every admin endpoint (docs/admin-api.md §Endpoints): its happy path as the signed-in
 * panel, the same request without a session (401 unauthorized), unknown routes (404 in
 * format A) and the public listener (404 when the split is on). Over HTTP, on the source and
 * against the executable (scripts/test.ts); the mail jobs are made through the Mail API, and
 * only the queued one, due in an hour, is written with SQL beside the server (`canSql`: not on
 * the executable's embedded engine, whose database lives inside it).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { canSql, type Reply, type TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { auditRows, startAdminServer } from './support';
import { expectA, expectAError } from '../helpers/envelopes';
import { registerUser } from '../helpers/users';

interface Ctx {
  /** The signed-in administrator the scenarios run as. */
  auth: AdminAuth;
  userId: string;
  userEmail: string;
  keyId: string;
  deadJob: string;
  keyedJob: string;
  idemKey: string;
  /** Only where `canSql` (see the header). */
  queuedJob: string;
}

/** Scenarios that need the queued job (written with SQL). */
const NEEDS_QUEUED_JOB = new Set([
  'mail job retry of a queued one → 409',
  'mail job cancel (queued → cancelled)',
  'mail job cancel of a cancelled one → 409',
]);

/** A setting's current value, as the Settings screen lists it. */
async function settingValue(s: TestServer, c: Ctx, key: string): Promise<unknown> {
  const r = await adminReq(s, c.auth, 'GET', '/api/admin/settings');
  return r.body.data.settings.find((x: { key: string }) => x.key === key)?.value;
}

type Check = (r: Reply, s: TestServer, c: Ctx) => void | Promise<void>;
/** [name, method, path, body, status, check of the answer]. */
type Scenario = [string, string, (c: Ctx) => string, ((c: Ctx) => unknown) | undefined, number, Check];

const scenarios: Scenario[] = [
  [
    'auth state',
    'GET',
    () => '/api/admin/auth/state',
    undefined,
    200,
    (r) => expect(r.body.data).toEqual({ setup_required: false, signed_in: true }),
  ],
  [
    'me',
    'GET',
    () => '/api/admin/auth/me',
    undefined,
    200,
    (r) =>
      expect(r.body.data).toEqual({
        admin: expect.objectContaining({ email: expect.any(String) }),
        csrf_token: expect.any(String),
      }),
  ],
  [
    'dashboard',
    'GET',
    () => '/api/admin/dashboard',
    undefined,
    200,
    (r, s) => {
      expect(r.body.data).toMatchObject({
        version: expect.any(String),
        engine: s.engine,
        database: { ok: true, latency_ms: expect.any(Number) },
        mail: {
          configured: true,
          jobs_24h: {
            queued: expect.any(Number),
            sending: expect.any(Number),
            sent: expect.any(Number),
            failed: expect.any(Number),
            dead: expect.any(Number),
            cancelled: expect.any(Number),
          },
        },
        counts: { users: expect.any(Number), keys_active: expect.any(Number), admins: 1 },
        extensions: { loaded: expect.any(Number), failed: expect.any(Array) },
      });
      expect(r.body.data.instances).toEqual([
        expect.objectContaining({
          id: expect.any(String),
          host: expect.any(String),
          pid: s.pid,
          version: expect.any(String),
          started_at: expect.any(String),
          seen_at: expect.any(String),
        }),
      ]);
      expect(r.body.data.recent_audit.length).toBeGreaterThan(0);
    },
  ],
  [
    'keys list',
    'GET',
    () => '/api/admin/keys',
    undefined,
    200,
    (r, _s, c) => expect(r.body.data.keys.map((k: any) => k.id)).toContain(c.keyId),
  ],
  [
    'key create (the secret once)',
    'POST',
    () => '/api/admin/keys',
    () => ({
      type: 'service',
      service: 'crm',
      permissions: ['db:query'],
      tables: ['orders'],
      expires_at: new Date(Date.now() + 86_400_000).toISOString(),
    }),
    201,
    (r) => {
      expect(r.body.data.secret).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
      expect(r.body.data.key).toMatchObject({
        type: 'service',
        service: 'crm',
        permissions: ['db:query'],
        tables: ['orders'],
        display: expect.stringMatching(/^sk_.+….{4}$/),
        site: false,
        revoked_at: null,
      });
      expect(JSON.stringify(r.body.data.key)).not.toContain(r.body.data.secret.slice(10));
    },
  ],
  [
    'site public key create (the setting written in the same transaction)',
    'POST',
    () => '/api/admin/keys',
    () => ({ type: 'public', site: true }),
    201,
    async (r, s, c) => {
      expect(r.body.data.key).toMatchObject({ type: 'public', site: true });
      expect(await settingValue(s, c, 'web.site_public_key')).toBe(r.body.data.secret);
    },
  ],
  [
    'key create refused (400 naming the field)',
    'POST',
    () => '/api/admin/keys',
    () => ({ type: 'service', service: 'crm', permissions: ['db:drop'] }),
    400,
    (r) => expectAError(r, 400, 'validation_error', { details: { fields: { permissions: expect.any(String) } } }),
  ],
  [
    'key revoke',
    'POST',
    (c) => `/api/admin/keys/${c.keyId}/revoke`,
    undefined,
    200,
    (r, _s, c) => expect(r.body.data.key).toMatchObject({ id: c.keyId, revoked_at: expect.any(String) }),
  ],
  [
    'key revoke of an unknown id → 404',
    'POST',
    () => `/api/admin/keys/${crypto.randomUUID()}/revoke`,
    undefined,
    404,
    (r) => expectAError(r, 404, 'not_found'),
  ],
  [
    'settings list',
    'GET',
    () => '/api/admin/settings',
    undefined,
    200,
    (r, s) => {
      const byKey = Object.fromEntries(r.body.data.settings.map((x: any) => [x.key, x]));
      expect(byKey['app.name']).toEqual({
        key: 'app.name',
        group: 'app',
        value: 'Basalt',
        default: 'Basalt',
        source: 'default',
        pinned_by: null,
        operator_only: null,
        live: true,
        type: 'string',
        description: expect.any(String),
        secret: false,
        is_set: true,
      });
      expect(byKey['web.port']).toMatchObject({ source: 'environment', pinned_by: 'BASALT_WEB_PORT', live: false });
      expect(byKey['mail.smtp_url']).toMatchObject({
        secret: true,
        value: null,
        default: null,
        source: 'environment',
        is_set: true,
      });
      // A secret at its empty default says so: not set (never 'set but hidden').
      expect(byKey['database.url']).toMatchObject(
        s.engine === 'embedded'
          ? { secret: true, value: null, source: 'default', is_set: false }
          : { secret: true, value: null, source: 'environment', is_set: true },
      );
      expect(byKey['web.public_api_access_mode']).toMatchObject({ type: 'enum', values: ['open', 'api_key_required'] });
    },
  ],
  [
    'setting set',
    'PUT',
    () => '/api/admin/settings/app.name',
    () => ({ value: 'Shop' }),
    200,
    async (r, s, c) => {
      expect(r.body.data.setting).toMatchObject({ key: 'app.name', value: 'Shop', source: 'database' });
      expect(await settingValue(s, c, 'app.name')).toBe('Shop');
      // The live value: what the public runtime config answers.
      expect((await s.req('GET', '/api/v1/public/runtime-config')).body.data.app_name).toBe('Shop');
    },
  ],
  [
    'setting set: wrong type → 400 naming the key',
    'PUT',
    () => '/api/admin/settings/db.max_limit',
    () => ({ value: 'lots' }),
    400,
    (r) =>
      expectAError(r, 400, 'validation_error', {
        details: { fields: { 'db.max_limit': expect.stringContaining('integer') } },
      }),
  ],
  [
    'setting set: out of range → 400',
    'PUT',
    () => '/api/admin/settings/admin.session_idle_minutes',
    () => ({ value: 0 }),
    400,
    (r) => expect(r.body.error.details.fields['admin.session_idle_minutes']).toMatch(/from 1/),
  ],
  [
    'setting set: pinned by the environment → 409 naming it',
    'PUT',
    () => '/api/admin/settings/web.trusted_proxies',
    () => ({ value: [] }),
    409,
    (r) => expectAError(r, 409, 'setting_pinned', { details: { pinned_by: 'BASALT_WEB_TRUSTED_PROXIES' } }),
  ],
  [
    'setting set: unknown key → 404',
    'PUT',
    () => '/api/admin/settings/no.such',
    () => ({ value: 1 }),
    404,
    (r) => expectAError(r, 404, 'not_found'),
  ],
  [
    'setting unset (back to default)',
    'DELETE',
    () => '/api/admin/settings/app.name',
    undefined,
    200,
    (r) => expect(r.body.data.setting).toMatchObject({ key: 'app.name', value: 'Basalt', source: 'default' }),
  ],
  [
    "SMTP test send reports the server's answer",
    'POST',
    () => '/api/admin/mail/test',
    () => ({ to: 'ops@example.com' }),
    200,
    (r) => expect(r.body.data).toEqual({ message_id: expect.any(String), response: expect.stringMatching(/^250/) }),
  ],
  [
    'SMTP test send to a bad address → 400',
    'POST',
    () => '/api/admin/mail/test',
    () => ({ to: 'not-an-address' }),
    400,
    (r) => expectAError(r, 400, 'validation_error'),
  ],
  [
    'templates list',
    'GET',
    () => '/api/admin/templates',
    undefined,
    200,
    (r) =>
      expect(r.body.data.templates).toContainEqual({
        name: 'verify_email',
        subject: expect.any(String),
        updated_at: expect.any(String),
      }),
  ],
  [
    'template detail with its variables',
    'GET',
    () => '/api/admin/templates/verify_email',
    undefined,
    200,
    (r) =>
      expect(r.body.data.template).toMatchObject({
        name: 'verify_email',
        variables: expect.arrayContaining(['app_name', 'link']),
      }),
  ],
  [
    'template put',
    'PUT',
    () => '/api/admin/templates/welcome',
    () => ({ subject: 'Welcome {{ name }}', html: '<p>Hi {{ name }}, {{ shop.url }}</p>' }),
    200,
    (r) => expect(r.body.data.template).toMatchObject({ name: 'welcome', variables: ['name', 'shop'], text: null }),
  ],
  [
    'template put that does not parse → 400',
    'PUT',
    () => '/api/admin/templates/broken',
    () => ({ subject: 'x', text: '{% if %}' }),
    400,
    (r) => expectAError(r, 400, 'validation_error'),
  ],
  [
    'template preview',
    'POST',
    () => '/api/admin/templates/preview',
    () => ({ subject: 'Hi {{ name }}', html: '<b>{{ name }}</b>', variables: { name: '<Ada>' } }),
    200,
    (r) =>
      expect(r.body.data).toEqual({
        subject: 'Hi <Ada>',
        html: '<b>&lt;Ada&gt;</b>',
        text: null,
        variables: ['name'],
        optional_variables: [],
      }),
  ],
  [
    'template preview without a variable read only under {% if %} (optional)',
    'POST',
    () => '/api/admin/templates/preview',
    () => ({ subject: 'Hi {{ name }}', text: '{% if code %}Code {{ code }}{% endif %}!', variables: { name: 'x' } }),
    200,
    (r) =>
      expect(r.body.data).toMatchObject({
        subject: 'Hi x',
        text: '!',
        variables: ['code', 'name'],
        optional_variables: ['code'],
      }),
  ],
  [
    'template test send: the stored template, now, with the SMTP answer; audited',
    'POST',
    () => '/api/admin/templates/welcome/test',
    () => ({ to: 'tester@example.com', variables: { name: 'Ada', shop: { url: 'https://shop.example' } } }),
    200,
    async (r, s, c) => {
      expect(r.body.data).toEqual({
        job_id: expect.any(String),
        message_id: expect.any(String),
        response: expect.any(String),
      });
      const row = (await auditRows(s, 'templates.test', c.auth)).filter((e) => e.target === 'welcome').at(-1);
      expect(row.diff).toMatchObject({ to: 'tester@example.com', ok: true });
    },
  ],
  [
    'template test send with a missing variable → 400 naming it',
    'POST',
    () => '/api/admin/templates/welcome/test',
    () => ({ to: 'tester@example.com', variables: {} }),
    400,
    (r) => expect(r.body.error.details.missing_variables).toEqual(['name', 'shop']),
  ],
  [
    'template preview with a missing variable → 400 naming it',
    'POST',
    () => '/api/admin/templates/preview',
    () => ({ subject: 'Hi {{ name }}', text: '{{ code }}', variables: { name: 'x' } }),
    400,
    (r) => expect(r.body.error.details.fields).toEqual({ 'variables.code': expect.any(String) }),
  ],
  [
    'template delete',
    'DELETE',
    () => '/api/admin/templates/welcome',
    undefined,
    200,
    (r) => expect(r.body.data).toEqual({}),
  ],
  [
    'template delete of an unknown one → 404',
    'DELETE',
    () => '/api/admin/templates/welcome',
    undefined,
    404,
    (r) => expectAError(r, 404, 'not_found'),
  ],
  [
    'mail jobs list',
    'GET',
    () => '/api/admin/mail/jobs?limit=2',
    undefined,
    200,
    (r) => {
      expect(r.body.data.jobs.length).toBe(2);
      expect(r.body.data.next_cursor).toEqual(expect.any(String));
      // The newest job: the template test send's (welcome), or a plain send's.
      expect([null, 'welcome']).toContain(r.body.data.jobs[0].template);
      expect(r.body.data.jobs[0]).toEqual({
        id: expect.any(String),
        state: expect.any(String),
        to: expect.any(Array),
        subject: expect.any(String),
        template: r.body.data.jobs[0].template,
        attempts: expect.any(Number),
        max_attempts: expect.any(Number),
        created_at: expect.any(String),
        updated_at: expect.any(String),
        next_attempt_at: null,
        sent_at: expect.any(String),
        last_error: null,
        history: [],
        message_id: expect.any(String),
        idempotency_key: null,
      });
    },
  ],
  [
    'mail jobs filtered by state and recipient',
    'GET',
    () => '/api/admin/mail/jobs?state=dead&recipient=DEAD@example.com',
    undefined,
    200,
    (r, _s, c) => expect(r.body.data.jobs.map((j: any) => j.id)).toEqual([c.deadJob]),
  ],
  [
    'mail jobs with an unknown state → 400',
    'GET',
    () => '/api/admin/mail/jobs?state=lost',
    undefined,
    400,
    (r) => expect(r.body.error.details.fields.state).toMatch(/one of/),
  ],
  [
    'mail job detail',
    'GET',
    (c) => `/api/admin/mail/jobs/${c.deadJob}`,
    undefined,
    200,
    (r, _s, c) => expect(r.body.data.job).toMatchObject({ id: c.deadJob, state: 'dead', to: ['dead@example.com'] }),
  ],
  [
    'mail job detail names the idempotency key it was sent with',
    'GET',
    (c) => `/api/admin/mail/jobs/${c.keyedJob}`,
    undefined,
    200,
    (r, _s, c) => expect(r.body.data.job).toMatchObject({ id: c.keyedJob, idempotency_key: c.idemKey }),
  ],
  [
    'mail job retry (dead → queued)',
    'POST',
    (c) => `/api/admin/mail/jobs/${c.deadJob}/retry`,
    undefined,
    200,
    (r) => {
      expect(['queued', 'sending', 'sent']).toContain(r.body.data.job.state);
      // The earlier round is kept: its state, attempts and error.
      expect(r.body.data.job.history).toEqual([
        {
          until: expect.any(String),
          state: 'dead',
          attempts: expect.any(Number),
          last_error: 'the mail server answered 550 refused (permanent)',
        },
      ]);
      expect(r.body.data.smtp_server).toMatch(/^127\.0\.0\.1:\d+$/);
    },
  ],
  [
    'mail job retry of a queued one → 409',
    'POST',
    (c) => `/api/admin/mail/jobs/${c.queuedJob}/retry`,
    undefined,
    409,
    (r) => expectAError(r, 409, 'invalid_state'),
  ],
  [
    'mail job cancel (queued → cancelled)',
    'POST',
    (c) => `/api/admin/mail/jobs/${c.queuedJob}/cancel`,
    undefined,
    200,
    (r) => expect(r.body.data.job.state).toBe('cancelled'),
  ],
  [
    'mail job cancel of a cancelled one → 409',
    'POST',
    (c) => `/api/admin/mail/jobs/${c.queuedJob}/cancel`,
    undefined,
    409,
    (r) => expectAError(r, 409, 'invalid_state'),
  ],
  [
    'mail job detail of an unknown id → 404',
    'GET',
    () => `/api/admin/mail/jobs/${crypto.randomUUID()}`,
    undefined,
    404,
    (r) => expectAError(r, 404, 'not_found'),
  ],
  [
    "extensions' jobs of contact-form",
    'GET',
    () => '/api/admin/jobs?extension=contact-form&limit=5',
    undefined,
    200,
    (r) => {
      expect(Array.isArray(r.body.data.jobs)).toBe(true);
      for (const j of r.body.data.jobs) expect(j.extension).toBe('contact-form');
    },
  ],
  [
    "extensions' jobs with an unknown state → 400",
    'GET',
    () => '/api/admin/jobs?state=lost',
    undefined,
    400,
    (r) => expect(r.body.error.details.fields.state).toMatch(/one of queued, running, succeeded, dead, cancelled/),
  ],
  [
    "extensions' cron entries and hooks",
    'GET',
    () => '/api/admin/jobs/schedules',
    undefined,
    200,
    (r) => {
      expect(r.body.data.cron).toContainEqual(
        expect.objectContaining({
          extension: 'contact-form',
          name: 'purge-rate-limits',
          expression: '17 * * * *',
          timezone: 'UTC',
          next_slot: expect.stringMatching(/T\d\d:17:00\.000Z$/),
        }),
      );
      expect(r.body.data.hooks).toContainEqual(
        expect.objectContaining({ extension: 'contact-form', name: 'mail.failed', source: 'event:mail.failed' }),
      );
    },
  ],
  [
    "an extension's job of an unknown id → 404",
    'GET',
    () => `/api/admin/jobs/${crypto.randomUUID()}`,
    undefined,
    404,
    (r) => expectAError(r, 404, 'job_not_found'),
  ],
  [
    "retry of an extension's unknown job → 404",
    'POST',
    () => `/api/admin/jobs/${crypto.randomUUID()}/retry`,
    undefined,
    404,
    (r) => expectAError(r, 404, 'job_not_found'),
  ],
  [
    "cancel of an extension's unknown job → 404",
    'POST',
    () => '/api/admin/jobs/not-a-job/cancel',
    undefined,
    404,
    (r) => expectAError(r, 404, 'job_not_found'),
  ],
  [
    'users search',
    'GET',
    () => '/api/admin/users?search=SHOPPER&limit=10',
    undefined,
    200,
    (r, _s, c) => {
      expect(r.body.data.total).toBe(1);
      expect(r.body.data.users).toEqual([
        {
          id: c.userId,
          email: c.userEmail,
          email_verified_at: null,
          disabled_at: null,
          created_at: expect.any(String),
          last_login_at: expect.any(String),
          locked_until: null,
        },
      ]);
    },
  ],
  [
    'user detail with sessions',
    'GET',
    (c) => `/api/admin/users/${c.userId}`,
    undefined,
    200,
    (r) =>
      expect(r.body.data.sessions).toEqual([
        expect.objectContaining({ id: expect.any(String), ip: expect.any(String), expires_at: expect.any(String) }),
      ]),
  ],
  [
    'user detail of an unknown id → 404',
    'GET',
    () => `/api/admin/users/${crypto.randomUUID()}`,
    undefined,
    404,
    (r) => expectAError(r, 404, 'not_found'),
  ],
  [
    'user end sessions',
    'POST',
    (c) => `/api/admin/users/${c.userId}/end-sessions`,
    undefined,
    200,
    async (r, s, c) => {
      expect(r.body.data.user.id).toBe(c.userId);
      expect((await s.req('GET', `/api/admin/users/${c.userId}`, {})).status).toBe(401);
    },
  ],
  [
    'user unlock',
    'POST',
    (c) => `/api/admin/users/${c.userId}/unlock`,
    undefined,
    200,
    (r) => expect(r.body.data.user.locked_until).toBeNull(),
  ],
  [
    'user disable',
    'POST',
    (c) => `/api/admin/users/${c.userId}/disable`,
    undefined,
    200,
    (r) => expect(r.body.data.user.disabled_at).toEqual(expect.any(String)),
  ],
  [
    'user enable',
    'POST',
    (c) => `/api/admin/users/${c.userId}/enable`,
    undefined,
    200,
    (r) => expect(r.body.data.user.disabled_at).toBeNull(),
  ],
  [
    'user resend verification',
    'POST',
    (c) => `/api/admin/users/${c.userId}/resend-verification`,
    undefined,
    200,
    (r) => expect(r.body.data.user.email_verified_at).toBeNull(),
  ],
  [
    'user delete',
    'DELETE',
    (c) => `/api/admin/users/${c.userId}`,
    undefined,
    200,
    async (r, s, c) => {
      expect(r.body.data).toEqual({});
      expectAError(await adminReq(s, c.auth, 'GET', `/api/admin/users/${c.userId}`), 404, 'not_found');
      const left = await adminReq(s, c.auth, 'GET', `/api/admin/users?search=${encodeURIComponent(c.userEmail)}`);
      expect(left.body.data.total).toBe(0);
    },
  ],
  [
    'extensions',
    'GET',
    () => '/api/admin/extensions',
    undefined,
    200,
    (r) => {
      const cf = r.body.data.extensions.find((e: any) => e.name === 'contact-form');
      expect(cf).toMatchObject({
        state: 'loaded',
        error: null,
        version: expect.any(String),
        routes: [{ method: 'POST', path: '/api/module/contact-form/submit' }],
      });
      expect(cf.settings).toContainEqual(expect.objectContaining({ key: 'to', description: expect.any(String) }));
    },
  ],
  [
    'extension setting set',
    'PUT',
    () => '/api/admin/extensions/contact-form/settings/to',
    () => ({ value: 'owner@example.com' }),
    200,
    async (r, s, c) => {
      expect(r.body.data.setting).toMatchObject({ key: 'to', value: 'owner@example.com', source: 'database' });
      const listed = (await adminReq(s, c.auth, 'GET', '/api/admin/extensions')).body.data.extensions;
      const cf = listed.find((e: { name: string }) => e.name === 'contact-form');
      expect(cf.settings.find((x: { key: string }) => x.key === 'to').value).toBe('owner@example.com');
    },
  ],
  [
    'extension setting of an unknown extension → 404',
    'PUT',
    () => '/api/admin/extensions/nope/settings/to',
    () => ({ value: 'x' }),
    404,
    (r) => expectAError(r, 404, 'not_found'),
  ],
  [
    'request log filtered by area and status',
    'GET',
    () => '/api/admin/logs?area=admin&status=2xx&limit=5',
    undefined,
    200,
    (r) => {
      expect(r.body.data.entries.length).toBeGreaterThan(0);
      expect(r.body.data.entries.every((e: any) => e.area === 'admin' && e.status >= 200 && e.status < 300)).toBe(true);
      expect(r.body.data.entries[0]).toEqual({
        id: expect.any(String),
        at: expect.any(String),
        request_id: expect.any(String),
        method: expect.any(String),
        path: expect.stringMatching(/^\/api\/admin\//),
        status: expect.any(Number),
        duration_ms: expect.any(Number),
        area: 'admin',
        key_id: null,
        key_label: null,
        user_id: null,
        user_email: null,
        ip: expect.any(String),
        error: null,
      });
    },
  ],
  [
    'request log per minute',
    'GET',
    () => '/api/admin/logs/minutes?area=admin',
    undefined,
    200,
    (r) => {
      expect(r.body.data).toMatchObject({ sample_rate: 1, max_per_second: 50 });
      expect(r.body.data.minutes[0]).toEqual({
        minute: expect.any(String),
        requests: expect.any(Number),
        errors: expect.any(Number),
        kept: expect.any(Number),
      });
    },
  ],
  [
    'request log of an unknown request id → 404',
    'GET',
    () => '/api/admin/logs/no-such-request',
    undefined,
    404,
    (r) => expectAError(r, 404, 'not_found'),
  ],
  [
    'audit log filtered',
    'GET',
    () => '/api/admin/audit?action=keys.&limit=5',
    undefined,
    200,
    (r) => {
      expect(r.body.data.entries.length).toBeGreaterThan(0);
      expect(r.body.data.entries.every((e: any) => e.action.startsWith('keys.'))).toBe(true);
      expect(r.body.data.entries[0]).toEqual({
        id: expect.any(String),
        at: expect.any(String),
        admin_id: expect.any(String),
        admin_email: expect.any(String),
        ip: expect.any(String),
        user_agent: expect.any(String),
        action: expect.any(String),
        target: expect.any(String),
        diff: expect.anything(),
        request_id: expect.any(String),
        actor: 'admin',
        os_user: null,
        target_label: expect.any(String),
      });
    },
  ],
  [
    'data tables',
    'GET',
    () => '/api/admin/data/tables',
    undefined,
    200,
    (r) => expect(r.body.data.tables).toEqual(expect.any(Array)),
  ],
];

describe.each(ENGINES)('admin endpoints on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  let a: AdminAuth;
  const c = {} as Ctx;
  beforeAll(async () => {
    sink = await startSmtpSink();
    s = await startAdminServer(engine, {
      env: {
        BASALT_MAIL_SMTP_URL: sink.url,
        BASALT_MAIL_FROM: 'site@example.com',
        BASALT_WEB_PUBLIC_BASE_URL: 'https://shop.example',
      },
    });
    a = await signInAdmin(s);
    c.auth = a;
    c.userEmail = `shopper-${Date.now()}@example.com`;
    const reg = await registerUser(s, { email: c.userEmail });
    c.userId = reg.body.data.user.id;
    const key = await adminReq(s, a, 'POST', '/api/admin/keys', {
      type: 'service',
      service: 'shop',
      permissions: ['mail:send'],
    });
    c.keyId = key.body.data.key.id;
    const send = (body: object, headers: Record<string, string> = {}) =>
      s.req('POST', '/api/v1/mail/send', { body, headers: { 'x-api-key': key.body.data.secret, ...headers } });
    // The oldest job, sent with an Idempotency-Key through the Mail API.
    c.idemKey = crypto.randomUUID();
    const keyed = await send({ to: ['keyed@example.com'], subject: 'k', text: 'x' }, { 'idempotency-key': c.idemKey });
    expect(keyed.status).toBe(202);
    c.keyedJob = keyed.body.data.job_id;
    // A dead job: the server refuses the message for good. Only this one (its recipient): the
    // queued mails (this key's 'k', the registration's verification mail) may still be in
    // flight, and one of them must not take the refusal and leave this one sent. No wait for
    // them either: on a loaded machine the embedded executable once took over 30 s to send them.
    sink.refuse(1, 550, 'refused', { to: 'dead@example.com' });
    expect((await send({ to: ['dead@example.com'], subject: 'd', text: 'x', sync: true })).status).toBe(502);
    const dead = await adminReq(s, a, 'GET', '/api/admin/mail/jobs?state=dead&recipient=dead@example.com');
    c.deadJob = dead.body.data.jobs[0].id;
    for (const [to, subject] of [
      ['later@example.com', 'q'],
      ['more@example.com', 'm'],
    ]) {
      const sent = await send({ to: [to], subject, text: 'x', sync: true });
      expect(sent.status).toBe(200);
      if (subject === 'q') c.queuedJob = sent.body.data.job_id;
    }
    // A state a test cannot wait for: a queued job due in an hour.
    if (canSql(engine))
      await s.sql(
        `UPDATE basalt.mail_jobs SET state = 'queued', sent_at = NULL, run_at = now() + interval '1 hour' WHERE id = $1`,
        [c.queuedJob],
      );
  }, 180_000); // a server start, a registration and four sends: slow on a loaded machine
  afterAll(async () => {
    await s.stop();
    await sink.close();
  });

  const here = scenarios.filter(([n]) => canSql(engine) || !NEEDS_QUEUED_JOB.has(n));
  test.each(here)('%s', async (_name, method, path, body, status, check) => {
    const r = await adminReq(s, a, method, path(c), body?.(c));
    if (r.status !== status) console.error(r.text);
    expect(r.status).toBe(status);
    if (status < 400) expectA(r, status);
    else expect(r.body.success).toBe(false);
    await check(r, s, c);
  });

  test.each(
    here.filter(([n]) => n !== 'auth state'),
  )('%s without a session → 401 unauthorized', async (_name, method, path, body) => {
    const r = await adminReq(s, undefined, method, path(c), body?.(c));
    expectAError(r, 401, 'unauthorized');
  });

  test('auth state without a session: 200, signed_in false (the panel asks it before /auth/me)', async () => {
    const r = await adminReq(s, undefined, 'GET', '/api/admin/auth/state');
    expect([r.status, r.body.data]).toEqual([200, { setup_required: false, signed_in: false }]);
  });

  const unknown: [string, string][] = [
    ['GET', '/api/admin/nope'],
    ['POST', '/api/admin/keys/x/y/z'],
    ['GET', '/api/admin'],
    ['DELETE', '/api/admin/dashboard'],
  ];
  test.each(unknown)('unknown route %s %s → 404 in format A (signed in or not)', async (method, path) => {
    for (const auth of [a, undefined]) {
      const r = await adminReq(s, auth, method, path);
      expectAError(r, 404, 'not_found');
    }
  });
});

describe.each(ENGINES)('admin API with the public listener split off, on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  beforeAll(async () => {
    s = await startAdminServer(engine, { env: { BASALT_WEB_PUBLIC_API_SEPARATE: 'true' } });
    a = await signInAdmin(s);
  }, 60_000);
  afterAll(() => s.stop());

  const paths: [string, string][] = [
    ['GET', '/api/admin/auth/state'],
    ['POST', '/api/admin/auth/login'],
    ['GET', '/api/admin/keys'],
    ['GET', '/api/admin/dashboard'],
  ];
  test.each(paths)('%s %s: served on the main listener, 404 on the public one', async (method, path) => {
    const main = await s.req(method, path, {
      headers: a.headers(),
      body: method === 'POST' ? { email: a.email, password: a.password } : undefined,
    });
    expect(main.status).toBe(200);
    const pub = await s.req(method, path, {
      base: s.publicUrl,
      headers: a.headers(),
      body: method === 'POST' ? { email: a.email, password: a.password } : undefined,
    });
    expectAError(pub, 404, 'not_found');
  });

  test('the admin API is not in the public OpenAPI document', async () => {
    const doc = (await s.req('GET', '/api/openapi.json', { base: s.publicUrl })).body;
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/api/admin'))).toBe(false);
  });
});
