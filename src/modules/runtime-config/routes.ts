import { rootOf, type AreaFacts } from '../../http/areas';
import { Elysia, t } from 'elysia';
import type { Platform } from '../../platform';
import { mainBaseUrl, runtimeConfig } from './service';
import { publicAccess } from '../../http/api-key-guard';
import { siteKeyRuntimeConfig } from '../keys/site-key';

const RuntimeConfig = t.Object({
  success: t.Literal(true),
  data: t.Object({
    app_name: t.String(),
    api_base_url: t.String({ description: 'Public API base: auth, database, extensions, runtime config.' }),
    main_api_base_url: t.String({ description: 'Main listener API base: mail and files. Equal to api_base_url unless public_api_separate is true.' }),
    access_mode: t.Union([t.Literal('open'), t.Literal('api_key_required')]),
    public_api_separate: t.Boolean(),
    registration_open: t.Boolean(),
    email_verification_required: t.Boolean(),
    password_policy: t.Object({ min_length: t.Integer(), max_length: t.Integer() }),
    site_public_key: t.Optional(t.String({ description: 'Present in api_key_required mode when a site public key is designated.' })),
  }),
}, { title: 'RuntimeConfig', description: 'Public front-end parameters.' });

/** Hooks other areas use to add public facts (e.g. the site public key). */
export const runtimeConfigExtras: ((p: Platform) => Promise<Record<string, unknown>> | Record<string, unknown>)[] = [siteKeyRuntimeConfig];

export function runtimeConfigRoutes(p: Platform, area: AreaFacts) {
  return new Elysia({ name: 'basalt.runtime-config', prefix: rootOf(area) }).get(
    '/runtime-config',
    async ({ request }) => {
      await publicAccess(p, request);
      const base = (p.settings.get<string>('web.public_base_url') || new URL(request.url).origin).replace(/\/$/, '');
      const extra = Object.assign({}, ...(await Promise.all(runtimeConfigExtras.map((f) => f(p)))));
      return { success: true as const, data: runtimeConfig(p.settings, { public: base, main: mainBaseUrl(p.settings, p, request.url) }, extra) as never };
    },
    {
      response: { 200: RuntimeConfig },
      detail: {
        tags: ['Runtime config'],
        summary: 'Public front-end parameters',
        description: 'What a front-end may know before signing in. Never contains a secret. In api_key_required mode it needs X-API-Key with an active key (401 api_key_required without one) and includes site_public_key.',
        security: [{}, { ApiKey: [] }],
      },
    },
  );
}
