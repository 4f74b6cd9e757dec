/**
 * Create an API key on a test server and return the raw key (what a client sends in
 * X-API-Key): in process, or through the admin API of the executable (test/helpers/server.ts).
 * Defaults: a service key (service "test") when permissions are given, otherwise a public key.
 *
 * @example
 * const key = await createKey(s, { permissions: ['db:query'], tables: ['orders'] });
 * await s.req('POST', '/api/v1/db/query', { headers: { 'x-api-key': key }, body });
 */
import type { CreateKeyInput, KeyInfo } from '../../src/modules/keys/model';
import type { TestServer } from './server';

export async function createKey(s: TestServer, opts: Partial<CreateKeyInput> = {}): Promise<string> {
  const type = opts.type ?? (opts.permissions?.length ? 'service' : 'public');
  const service = opts.service ?? (type === 'service' ? 'test' : undefined);
  if (s.target === 'executable') {
    const { expiresAt, ...rest } = opts;
    const body = { ...rest, type, service, ...(expiresAt ? { expires_at: expiresAt } : {}) };
    return (await s.admin('POST', '/api/admin/keys', body)).body.data.secret;
  }
  const created = await s.platform.services.keys.create({ ...opts, type, service });
  return created.key;
}

/** Every API key (no secrets), as the admin API lists them: in process, or through the executable's admin API. */
export async function listKeys(
  s: TestServer,
): Promise<Pick<KeyInfo, 'id' | 'prefix' | 'last4' | 'revoked_at' | 'site' | 'last_used_at'>[]> {
  if (s.target === 'executable') return (await s.admin('GET', '/api/admin/keys')).body.data.keys;
  return s.platform.services.keys.list();
}

/** Revoke the key whose raw value is `raw` (what createKey returned), the same two ways. */
export async function revokeKey(s: TestServer, raw: string): Promise<void> {
  const id = (await listKeys(s)).find((k) => raw.startsWith(k.prefix) && raw.endsWith(k.last4))?.id;
  if (!id) throw new Error('no listed key matches the one given');
  if (s.target === 'executable') await s.admin('POST', `/api/admin/keys/${id}/revoke`);
  else await s.platform.services.keys.revoke(id);
}
