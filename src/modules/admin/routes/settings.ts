/** Settings screen (docs/admin-api.md §Settings) and the SMTP test send. */
import type { AnyElysia } from 'elysia';
import type { Platform } from '../../../platform';
import { Bodies } from '../model';
import { changeSetting, listSettings } from '../settings';

const ok = <T>(data: T) => ({ success: true as const, data });

export function settingsRoutes(app: AnyElysia, p: Platform): AnyElysia {
  return app
    .get('/settings', () => ok({ settings: listSettings(p) }))
    .put('/settings/:key', async ({ params, body, admin }: any) => ok({ setting: await changeSetting(p, admin.actor, params.key, body.value) }), {
      body: Bodies.value,
    })
    .delete('/settings/:key', async ({ params, admin }: any) => ok({ setting: await changeSetting(p, admin.actor, params.key, undefined) }));
}
