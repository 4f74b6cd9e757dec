/** Dashboard screen (docs/admin-api.md §Dashboard). */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { dashboard } from '../dashboard';
import { Responses, reply } from '../responses';

export function dashboardRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  return app.get('/dashboard', async () => ok(await dashboard(p)), { response: reply(Responses.dashboard) });
}
