/** Dashboard screen (docs/admin-api.md §Dashboard). */
import type { Platform } from '../../../platform';
import type { AdminApp } from '../routes';
import { dashboard } from '../dashboard';

const ok = <T>(data: T) => ({ success: true as const, data });

export function dashboardRoutes(app: AdminApp, p: Platform): AdminApp {
  return app.get('/dashboard', async () => ok(await dashboard(p)));
}
