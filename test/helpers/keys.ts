/**
 * Create an API key on a test server and return the raw key (what a client sends in
 * X-API-Key): in process, or through the admin API of the executable (test/helpers/server.ts).
 * Defaults: a service key (service "test") when permissions are given, otherwise a public key.
 *
 * @example
 * const key = await createKey(s, { permissions: ['db:query'], tables: ['orders'] });
 * await s.req('POST', '/api/v1/db/query', { headers: { 'x-api-key': key }, body });
 */
import type { CreateKeyInput } from '../../src/modules/keys/model';
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
