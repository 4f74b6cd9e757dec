import { rootOf, type AreaFacts } from '../../http/areas';
import { Elysia } from 'elysia';
import type { Basalt } from '../../services';
import { baseUrls, runtimeConfig } from './service';
import { RuntimeConfig, type RuntimeConfigData } from './model';
import { platformGuards } from '../../guards';
import { siteKeyRuntimeConfig } from '../keys/site-key';

/** Hooks other areas use to add public facts (e.g. the site public key). */
export const runtimeConfigExtras: ((p: Basalt) => Promise<Partial<RuntimeConfigData>> | Partial<RuntimeConfigData>)[] =
  [siteKeyRuntimeConfig];

export function runtimeConfigRoutes(p: Basalt, area: AreaFacts) {
  return new Elysia({ name: 'basalt.runtime-config', prefix: rootOf(area) }).use(platformGuards(p, p.services)).get(
    '/runtime-config',
    async ({ request }) => {
      const extra: Partial<RuntimeConfigData> = Object.assign(
        {},
        ...(await Promise.all(runtimeConfigExtras.map((f) => f(p)))),
      );
      return {
        success: true as const,
        data: runtimeConfig(p.settings, baseUrls(p.settings, p, request.url), extra),
      };
    },
    {
      // The access-mode gate (docs/api-keys.md): in api_key_required mode, an active key.
      publicAccess: true,
      response: { 200: RuntimeConfig },
      detail: {
        summary: 'Public front-end parameters',
        description:
          'What a front-end may know before signing in. Never contains a secret. In api_key_required mode it needs X-API-Key with an active key (401 api_key_required without one) and includes site_public_key.',
        security: [{}, { ApiKey: [] }],
      },
    },
  );
}
