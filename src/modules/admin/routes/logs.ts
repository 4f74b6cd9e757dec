/**
 * The Logs screen (docs/logs.md): the request log filtered by time, status class, area, path,
 * key and user; one request's rows with its error cause and the audit entries it made; requests
 * and errors per minute. Read-only, through the request log service (src/modules/logs/service.ts).
 */
import { t } from 'elysia';
import type { Static } from 'elysia';
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { AdminErrors } from '../errors';
import { Queries } from '../model';
import { Responses, reply } from '../responses';
import type { LogFilter, StatusClass } from '../../logs/store';

const REQUEST_ID = t.Object({ requestId: t.String({ pattern: '^[A-Za-z0-9._:-]{1,128}$' }) });

/** The query's filters as the service takes them (an empty field filters nothing). */
function filterOf(q: Static<typeof Queries.logs>): LogFilter {
  const since = q.since ? new Date(q.since) : undefined;
  const until = q.until ? new Date(q.until) : undefined;
  if (since && until && since >= until) throw AdminErrors.field('since', 'must be before until');
  return {
    since,
    until,
    status: (q.status || undefined) as StatusClass | undefined,
    area: q.area || undefined,
    path: q.path || undefined,
    key: q.key?.trim() || undefined,
    user: q.user?.trim() || undefined,
  };
}

export function logsRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  const logs = () => p.services.logs;
  return app
    .get(
      '/logs',
      async ({ query }) =>
        ok(await logs().search({ ...filterOf(query), limit: query.limit ?? 50, before: query.before })),
      { query: Queries.logs, response: reply(Responses.logs) },
    )
    .get(
      '/logs/minutes',
      async ({ query }) => {
        const f = filterOf(query);
        const until = f.until ?? new Date();
        const since = f.since ?? new Date(until.getTime() - 60 * 60_000);
        return ok(await logs().minutes({ ...f, since, until }));
      },
      { query: Queries.logs, response: reply(Responses.logMinutes) },
    )
    .get(
      '/logs/:requestId',
      async ({ params }) => {
        const detail = await logs().detail(params.requestId);
        if (!detail.entries.length) throw AdminErrors.notFound(`Request ${params.requestId} in the request log`);
        return ok(detail);
      },
      { params: REQUEST_ID, response: reply(Responses.logDetail) },
    );
}
