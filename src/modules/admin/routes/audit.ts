/** Audit log screen (docs/admin-api.md §Audit log): read-only, filtered, newest first. */
import type { Platform } from '../../../platform';
import type { AdminApp } from '../routes';
import { Queries } from '../model';

const ok = <T>(data: T) => ({ success: true as const, data });

export function auditRoutes(app: AdminApp, p: Platform): AdminApp {
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
    { query: Queries.audit },
  );
}
