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
import { runBinary } from './binary';

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

/**
 * Create a key with the executable's own command line (`basalt keys create … --json`), for a
 * suite that runs `exe` itself (test/helpers/binary.ts: runBinary's `cwd` and `env`): its id
 * and raw key. Defaults as createKey's. Throws with the command's error output when it fails.
 *
 * @example
 * const { key } = await createKeyByCli(exe, dir, env, { permissions: ['db:query'], tables: ['notes'] });
 */
export async function createKeyByCli(
  exe: string,
  cwd: string,
  env: Record<string, string>,
  opts: { type?: 'public' | 'service'; service?: string; permissions?: string[]; tables?: string[] } = {},
): Promise<{ id: string; key: string }> {
  const type = opts.type ?? (opts.permissions?.length ? 'service' : 'public');
  const service = opts.service ?? (type === 'service' ? 'test' : undefined);
  const args = ['keys', 'create', '--type', type];
  if (service) args.push('--service', service);
  if (opts.permissions?.length) args.push('--permissions', opts.permissions.join(','));
  if (opts.tables?.length) args.push('--tables', opts.tables.join(','));
  const r = await runBinary(exe, [...args, '--json'], cwd, env);
  if (r.code !== 0) throw new Error(`basalt keys create failed (${r.code}): ${r.stderr}`);
  const { id, key } = JSON.parse(r.stdout) as { id: string; key: string };
  return { id, key };
}
