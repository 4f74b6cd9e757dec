/**
 * The public API access mode and the site public key in the runtime config (docs/api-keys.md).
 * Over HTTP: runs against the executable (scripts/test.ts), keys and settings changed through
 * its admin API.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { createKey, listKeys, revokeKey } from '../helpers/keys';
import { expectAError } from '../helpers/envelopes';
import { eventually } from '../helpers/wait';

const PATH = '/api/v1/public/runtime-config';

/** A live setting's value: in process, or as the executable's admin API lists it. */
async function settingValue(s: TestServer, key: string): Promise<unknown> {
  if (s.target === 'source') return s.platform.settings.getUntyped(key);
  return (await s.admin('GET', '/api/admin/settings')).body.data.settings.find((x: { key: string }) => x.key === key)
    ?.value;
}

/** A key as the admin API lists it (with its site flag and last use). */
async function keyInfo(s: TestServer, raw: string): Promise<any> {
  return (await listKeys(s)).find((k) => raw.startsWith(k.prefix) && raw.endsWith(k.last4));
}

describe.each(ENGINES)('access mode and runtime config on %s', (engine) => {
  let s: TestServer;
  let site: { id: string; key: string };
  const siteKey = async (name?: string) => {
    const key = await createKey(s, { type: 'public', site: true, ...(name ? { name } : {}) });
    return { id: (await keyInfo(s, key)).id as string, key };
  };
  let otherPublic: string;
  let service: string;
  const rc = (key?: string) => s.req('GET', PATH, { headers: key === undefined ? {} : { 'x-api-key': key } });
  const mode = (m: 'open' | 'api_key_required') => s.settings.set('web.public_api_access_mode', m);

  beforeAll(async () => {
    s = await startServer(engine);
    site = await siteKey('storefront');
    otherPublic = await createKey(s, { type: 'public' });
    service = await createKey(s, { permissions: ['mail:send'] });
  }, 60_000);
  afterAll(() => s.stop());

  test('the site key is designated through the setting and flagged in lists', async () => {
    expect(await settingValue(s, 'web.site_public_key')).toBe(site.key);
    const list = await listKeys(s);
    expect(list.filter((k) => k.site).map((k) => k.id)).toEqual([site.id]);
  });

  const scenarios: [string, 'open' | 'api_key_required', () => string | undefined, number, string | null, boolean][] = [
    // name, mode, key sent, status, error code, site_public_key shown
    ['open, no key', 'open', () => undefined, 200, null, false],
    ['open, site key', 'open', () => site.key, 200, null, false],
    ['open, invalid key is ignored', 'open', () => 'pk_' + 'z'.repeat(43), 200, null, false],
    ['required, no key', 'api_key_required', () => undefined, 401, 'api_key_required', false],
    ['required, empty key', 'api_key_required', () => '', 401, 'api_key_required', false],
    ['required, invalid key', 'api_key_required', () => 'pk_' + 'z'.repeat(43), 401, 'unauthorized', false],
    ['required, site key', 'api_key_required', () => site.key, 200, null, true],
    ['required, another public key', 'api_key_required', () => otherPublic, 200, null, true],
    ['required, a service key', 'api_key_required', () => service, 200, null, true],
  ];
  test.each(scenarios)('%s', async (_n, m, key, status, code, shown) => {
    await mode(m);
    const r = await rc(key());
    if (code) {
      expectAError(r, status, code);
      return;
    }
    expect(r.status).toBe(status);
    expect(r.body.data.access_mode).toBe(m);
    expect(r.body.data.site_public_key).toBe(shown ? site.key : undefined);
  });

  // docs/api-keys.md: every public prefix answers a missing key with api_key_required in that
  // mode; mail is on the main listener, outside the access mode, so it stays unauthorized.
  const routes: [string, string, string, unknown][] = [
    ['runtime config', 'GET', PATH, undefined],
    ['auth', 'GET', '/api/v1/auth/me', undefined],
    ['Database API query', 'POST', '/api/v1/db/query', { entity: 'x', action: 'select' }],
    ['Database API begin', 'POST', '/api/v1/db/transaction/begin', {}],
    ['mail (main listener)', 'POST', '/api/v1/mail/send', { to: ['a@example.com'], text: 'x' }],
  ];
  test.each(routes)('missing key on %s: the code follows the mode', async (name, method, path, body) => {
    const codes: Record<string, string> = {};
    for (const m of ['open', 'api_key_required'] as const) {
      await mode(m);
      const r = await s.req(method, path, { body });
      if (r.status !== 200) codes[m] = `${r.status} ${r.body.error?.code ?? r.body.errors?.[0]?.code}`;
    }
    await mode('open');
    const mail = name.startsWith('mail');
    expect(codes.api_key_required).toBe(mail ? '401 unauthorized' : '401 api_key_required');
    if (name === 'runtime config') expect(codes.open).toBeUndefined();
    else if (name !== 'auth') expect(codes.open).toBe('401 unauthorized');
  });

  test('the mode switches live, both ways', async () => {
    await mode('api_key_required');
    expect((await rc()).status).toBe(401);
    await mode('open');
    expect((await rc()).status).toBe(200);
    await mode('api_key_required');
    expect((await rc()).body.error.message).toMatch(/X-API-Key/);
  });

  test('never a service key, never a revoked key, never in open mode', async () => {
    await mode('api_key_required');
    // The setting takes only a public key's shape (nor is a service key's secret stored there)…
    for (const bad of [service, 'not a key', ` ${site.key}x`])
      expect(await s.settings.set('web.site_public_key', bad).then(() => 'stored', String)).toMatch(
        /web\.site_public_key.*a public key \(pk_ and 43 characters\) or empty/,
      );
    expect(await settingValue(s, 'web.site_public_key')).toBe(site.key);
    // …and publishes it only while it is an active public key: one never made is not shown.
    await s.settings.set('web.site_public_key', `pk_${'q'.repeat(43)}`);
    expect((await rc(otherPublic)).body.data.site_public_key).toBeUndefined();

    const doomed = await siteKey();
    expect((await rc(otherPublic)).body.data.site_public_key).toBe(doomed.key);
    await revokeKey(s, doomed.key);
    expect((await rc(otherPublic)).body.data.site_public_key).toBeUndefined();
    expect((await rc(doomed.key)).status).toBe(401);

    await s.settings.set('web.site_public_key', site.key);
    await mode('open');
    expect((await rc()).body.data.site_public_key).toBeUndefined();
  });

  test('publishing the site key does not count as a use of it', async () => {
    const fresh = await siteKey();
    await mode('api_key_required');
    for (let i = 0; i < 3; i++) expect((await rc(service)).body.data.site_public_key).toBe(fresh.key);
    // A sentinel: the first use of another key, after those answers. A use's write is issued
    // before the answer, so the sentinel's is issued after any of theirs: once it is there, theirs would be.
    const sentinel = await createKey(s, { type: 'public' });
    expect((await rc(sentinel)).status).toBe(200);
    await eventually(async () => (await keyInfo(s, sentinel)).last_used_at !== null, {
      what: "the sentinel key's use",
    });
    expect((await keyInfo(s, fresh.key)).last_used_at).toBeNull();
    await s.settings.set('web.site_public_key', site.key);
    await mode('open');
  });

  test('no site key designated: nothing shown', async () => {
    await mode('api_key_required');
    await s.settings.unset('web.site_public_key');
    const r = await rc(site.key);
    expect(r.status).toBe(200);
    expect(r.body.data).not.toHaveProperty('site_public_key');
    await s.settings.set('web.site_public_key', site.key);
    await mode('open');
  });
});
