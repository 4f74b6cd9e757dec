/**
 * Create an API key on a test server and return the raw key (what a client sends in
 * X-API-Key). Defaults: a service key (service "test") when permissions are given,
 * otherwise a public key.
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
  const created = await s.platform.services.keys.create({ ...opts, type, service });
  return created.key;
}
