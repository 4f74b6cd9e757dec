/**
 * Data browser screen (docs/admin-api.md §Data browser): HTTP over the data browser
 * service (src/modules/database/browser/browser.ts), which checks names against the live catalog and
 * encodes values as the Database API does. Each change and its audit row share one
 * transaction: a failed change leaves neither.
 */
import { t } from 'elysia';
import type { Basalt } from '../../../services';
import { TYPES_ROLES } from '../../database/types';
import type { AdminApp, Ok } from '../area';
import { signedIn } from '../guard';
import { createDataBrowser, type DataBrowser, type SelectQuery } from '../../database/browser/browser';
import { AdminErrors } from '../errors';
import { Bodies } from '../model';
import { Responses, reply, replyCreated } from '../responses';
import { createDataAccess, type DataAccess } from '../data-access';
import { createDataSchema, type DataSchema } from '../data-schema';

/** `filters` / `sort` of the export query: JSON text, or absent. */
function jsonParam(name: string, raw: unknown): unknown {
  if (raw === undefined || raw === '') return undefined;
  try {
    return JSON.parse(String(raw));
  } catch {
    throw AdminErrors.field(name, 'must be JSON, e.g. [{"field":"id","op":"gt","value":10}]');
  }
}

/** The first chunk is read before answering, so a bad table or filter is a JSON error, not a broken download. */
async function startedStream(stream: ReadableStream<Uint8Array>): Promise<ReadableStream<Uint8Array>> {
  const reader = stream.getReader();
  const first = await reader.read();
  return new ReadableStream<Uint8Array>({
    start(controller) {
      if (first.done) controller.close();
      else controller.enqueue(first.value);
    },
    async pull(controller) {
      const next = await reader.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

export function dataRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  let browser: DataBrowser | undefined;
  const data = () => (browser ??= createDataBrowser(p, p.services.database));
  let access: DataAccess | undefined;
  const grants = () => (access ??= createDataAccess(p));
  let editor: DataSchema | undefined;
  const schema = () => (editor ??= createDataSchema(p));
  return (
    app
      .get('/data/tables', async () => ok({ tables: await data().tables() }), { response: reply(Responses.tables) })
      // The schema editor: a table's structure; changes previewed (SQL and warnings, rolled back) or
      // applied in one audited transaction written as a migration file.
      .get('/data/tables/:table', async ({ params }) => ok(await schema().structure(params.table)), {
        response: reply(Responses.structure),
      })
      .post('/data/tables/preview', async ({ body }) => ok(await schema().preview(body.changes)), {
        body: Bodies.schema,
        response: reply(Responses.schemaPreview),
      })
      .post('/data/tables', async ({ body, admin }) => ok(await schema().apply(signedIn(admin).actor, body.changes)), {
        body: Bodies.schema,
        response: reply(Responses.schemaApplied),
      })
      // TypeScript declarations for the JS client as a role sees the schema (docs/client.md, Types).
      .get(
        '/data/types',
        async ({ query }) => {
          const role = query.role ?? 'user';
          return ok({ role, types: await p.services.database.types(role) });
        },
        {
          query: t.Object({ role: t.Optional(t.Union(TYPES_ROLES.map((r) => t.Literal(r)))) }),
          response: reply(Responses.types),
        },
      )
      // Users' own data (docs/database.md): grants, row-level security, policies, warnings.
      .get('/data/:table/access', async ({ params }) => ok(await grants().access(params.table)))
      // Grants, RLS, policies, realtime: applied in one audited transaction and written as a migration file.
      .post(
        '/data/:table/access',
        async ({ params, body, admin }) => ok(await grants().change(signedIn(admin).actor, params.table, body.changes)),
        { body: Bodies.access },
      )
      // The same changes checked and run in a transaction rolled back: their SQL, or the refusal.
      .post(
        '/data/:table/access/preview',
        async ({ params, body }) => ok(await grants().preview(params.table, body.changes)),
        { body: Bodies.access },
      )
      // A select as a site user or anon, read-only; audited before it runs.
      .post(
        '/data/:table/try-as',
        async ({ params, body, admin }) => {
          await p.services.admin.audited(signedIn(admin).actor, 'data.try_as', async (_tx, note) =>
            note(params.table, { user_id: body.user_id ?? null, filters: body.filters }),
          );
          return ok(await grants().tryAs(params.table, body));
        },
        { body: Bodies.tryAs },
      )
      // The fields as sent: the select checks each (its query builder names what is wrong).
      .post(
        '/data/:table/select',
        async ({ params, body }) => ok(await data().select(params.table, (body ?? {}) as SelectQuery)),
        { body: Bodies.select, response: reply(Responses.rows) },
      )
      .post(
        '/data/:table/rows',
        async ({ params, body, set, admin }) => {
          const row = await p.services.admin.audited(signedIn(admin).actor, 'data.insert', async (tx, note) => {
            const r = await data().insert(tx, params.table, body.data);
            note(params.table, { data: body.data });
            return r;
          });
          set.status = 201;
          return ok({ row });
        },
        { body: Bodies.insertRow, response: replyCreated(Responses.row) },
      )
      .patch(
        '/data/:table/rows',
        async ({ params, body, admin }) => {
          const row = await p.services.admin.audited(signedIn(admin).actor, 'data.update', async (tx, note) => {
            const before = await data().row(tx, params.table, body.key);
            const r = await data().update(tx, params.table, body.key, body.data);
            // Each changed column old → new, so the log shows what was there before.
            const changes = Object.fromEntries(
              Object.keys(body.data).map((c) => [c, { before: before?.[c] ?? null, after: r[c] ?? null }]),
            );
            // The row's key goes into the target's name (a column may be called "key").
            const keyText = Object.entries(body.key as Record<string, unknown>)
              .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
              .join(', ');
            note(params.table, changes, `${params.table} (${keyText})`);
            return r;
          });
          return ok({ row });
        },
        { body: Bodies.updateRow, response: reply(Responses.row) },
      )
      .post(
        '/data/:table/delete',
        async ({ params, body, admin }) => {
          const count = await p.services.admin.audited(signedIn(admin).actor, 'data.delete', async (tx, note) => {
            const n = await data().deleteRows(tx, params.table, body.keys);
            note(params.table, { count: n, keys: body.keys.slice(0, 100) });
            return n;
          });
          return ok({ count });
        },
        { body: Bodies.deleteRows, response: reply(Responses.deleted) },
      )
      .post(
        '/data/:table/import',
        async ({ params, body, admin }) => {
          const r = await p.services.admin.audited(signedIn(admin).actor, 'data.import', async (tx, note) => {
            const out = await data().importCsv(tx, params.table, body.csv);
            note(params.table, { inserted: out.inserted, bytes: body.csv.length });
            return out;
          });
          return ok(r);
        },
        { body: Bodies.importCsv, response: reply(Responses.imported) },
      )
      .get('/data/:table/export.csv', async ({ params, query }) => {
        // Parsed, not checked here: the export checks them as a select does.
        const q = { filters: jsonParam('filters', query.filters), sort: jsonParam('sort', query.sort) } as Pick<
          SelectQuery,
          'filters' | 'sort'
        >;
        const formulas = query.formulas ?? 'escape';
        if (formulas !== 'escape' && formulas !== 'keep')
          throw AdminErrors.field('formulas', "must be 'escape' (the default) or 'keep'");
        const stream = await startedStream(data().exportCsv(params.table, q, formulas));
        const name = String(params.table).replace(/[^A-Za-z0-9_.-]/g, '_');
        return new Response(stream, {
          headers: {
            'content-type': 'text/csv; charset=utf-8',
            'content-disposition': `attachment; filename="${name}.csv"`,
            'cache-control': 'no-store',
          },
        });
      })
  );
}
