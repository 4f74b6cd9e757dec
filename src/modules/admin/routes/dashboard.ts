/** Dashboard screen (docs/admin-api.md §Dashboard). */
import type { AnyElysia } from 'elysia';
import type { Platform } from '../../../platform';
import { dashboard } from '../dashboard';

const ok = <T>(data: T) => ({ success: true as const, data });

export function dashboardRoutes(app: AnyElysia, p: Platform): AnyElysia {
  return app.get('/dashboard', async () => ok(await dashboard(p)));
}
