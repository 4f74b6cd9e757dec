import type { Basalt } from '../../services';

/**
 * Runtime-config contribution: the site public key, only in `api_key_required` mode
 * and only while it is an active public key (a revoked key, or a service key put in
 * the setting by mistake, is never published).
 */
export async function siteKeyRuntimeConfig(p: Basalt): Promise<{ site_public_key?: string }> {
  if (p.settings.get('web.public_api_access_mode') !== 'api_key_required') return {};
  const key = await p.services.keys.sitePublicKey();
  return key ? { site_public_key: key } : {};
}
