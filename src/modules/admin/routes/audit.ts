/** Audit log screen (docs/admin-api.md §Audit log): read-only, filtered, newest first. */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { Queries } from '../model';
import { Responses, reply } from '../responses';

export function auditRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  return app.get(
    '/audit',
    async ({ query }) =>
      ok(
        await p.services.admin.audit({
          ...query,
          since: query.since ? new Date(query.since) : undefined,
          until: query.until ? new Date(query.until) : undefined,
        }),
      ),
    { query: Queries.audit, response: reply(Responses.audit) },
  );
}
