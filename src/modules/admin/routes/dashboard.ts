/** Dashboard screen (docs/admin-api.md §Dashboard). */
import type { Platform } from '../../../platform';
import type { AdminApp, Ok } from '../routes';
import { dashboard } from '../dashboard';

export function dashboardRoutes(app: AdminApp, p: Platform, ok: Ok): AdminApp {
  return app.get('/dashboard', async () => ok(await dashboard(p)));
}
