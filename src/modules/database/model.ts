/**
 * Schemas of the Database API: request validation, types and the OpenAPI document
 * come from these declarations. Operator, action and direction are plain strings
 * with an `enum` for the document, checked by the service so the error names the
 * exact position (`filters[2].op`) and lists what is allowed.
 */
import { t, type Static } from 'elysia';
// TypeBox's own Integer: Elysia's `t.Integer` also accepts digit strings and is a
// transform, which makes every body go through a decode pass (bench/db-query.ts).
import { Type } from '@sinclair/typebox';
import { AREA } from '../../http/areas';
import { successOf } from '../../http/envelope-schemas';

export const ACTIONS = ['select', 'insert', 'update', 'delete'] as const;
export const OPERATORS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'like', 'ilike', 'is_null'] as const;
export const DIRECTIONS = ['asc', 'desc'] as const;
export type Action = (typeof ACTIONS)[number];
export type Operator = (typeof OPERATORS)[number];

const Row = t.Record(t.String(), t.Unknown(), {
  title: 'DbRow',
  description: 'Column name → value (see docs/database.md for the representation of each type).',
});

export const Filter = t.Object(
  {
    field: t.String({ description: 'Column of the entity.' }),
    op: t.String({ enum: [...OPERATORS], description: 'Operator: eq neq gt gte lt lte in not_in like ilike is_null.' }),
    value: t.Optional(
      t.Unknown({
        description:
          'Compared value; a non-empty array for in/not_in; true|false for is_null; a pattern for like/ilike.',
      }),
    ),
  },
  { title: 'DbFilter', additionalProperties: false },
);

export const Sort = t.Object(
  {
    field: t.String({ description: 'Column to order by.' }),
    // No `enum`: the service takes any letter case (`Desc`), and the document must not be stricter.
    direction: t.Optional(
      t.String({
        description: 'asc (default) or desc, in any letter case (asc, DESC, Desc…).',
        examples: ['asc', 'desc'],
      }),
    ),
  },
  { title: 'DbSort', additionalProperties: false },
);

/**
 * A condition on a column and an order, as the Database API, the admin data browser and the
 * panel's filter bar (src/admin-ui/screens/data-filters.tsx) all take them: declared once, here.
 */
export type Filter = Static<typeof Filter>;
export type Sort = Static<typeof Sort>;

export const QueryBody = t.Object(
  {
    entity: t.String({
      description: "Table of the data schema; must be in the API key's table whitelist.",
      example: 'orders',
    }),
    action: t.String({ enum: [...ACTIONS], description: 'select, insert, update or delete.' }),
    fields: t.Optional(
      t.Array(t.String(), {
        description: 'Columns to return (all columns when omitted); narrows RETURNING for insert/update/delete.',
      }),
    ),
    filters: t.Optional(
      t.Array(Filter, { description: 'Conditions, all of which must hold (AND). Required for update and delete.' }),
    ),
    data: t.Optional(
      t.Union([Row, t.Array(Row)], {
        description: 'insert: one object or a non-empty array of objects (one statement); update: the columns to set.',
      }),
    ),
    sort: t.Optional(t.Array(Sort, { description: 'select: ordering, first item first.' })),
    limit: t.Optional(
      Type.Integer({
        minimum: 0,
        description: 'select: rows to return; default 100, at most the setting db.max_limit (1000).',
      }),
    ),
    offset: t.Optional(Type.Integer({ minimum: 0, description: 'select: rows to skip; default 0.' })),
    total: t.Optional(
      t.Boolean({ description: 'select: also return data.total, the number of matching rows ignoring limit/offset.' }),
    ),
    transaction_id: t.Optional(
      t.String({ description: 'Run inside this open transaction (from /api/v1/db/transaction/begin).' }),
    ),
  },
  {
    title: 'DbQueryRequest',
    additionalProperties: false,
    description: 'A parameterized query. The legacy raw SQL field "query" is refused with 403 raw_sql_disabled.',
    // OpenAPI 3.0 schemas take one `example`; docs/database.md has one per action.
    example: {
      entity: 'orders',
      action: 'select',
      fields: ['id', 'status', 'total'],
      filters: [{ field: 'status', op: 'eq', value: 'paid' }],
      sort: [{ field: 'created_at', direction: 'desc' }],
      limit: 20,
      total: true,
    },
  },
);
export type QueryBody = Static<typeof QueryBody>;

/** The `data` of a query's answer. */
export const QueryResultData = t.Object({
  rows: t.Array(Row, {
    description: 'Selected rows, or the inserted/updated/deleted rows (RETURNING), narrowed by fields.',
  }),
  count: Type.Integer({ description: 'Rows returned (select) or affected (insert/update/delete).' }),
  total: t.Optional(
    Type.Integer({ description: 'select with total:true: rows matching the filters, ignoring limit/offset.' }),
  ),
});
export type QueryResultData = Static<typeof QueryResultData>;

const ok = successOf(AREA.db);

export const QueryResult = ok(QueryResultData, {
  title: 'DbQueryResult',
  example: { success: true, data: { rows: [{ id: 42, status: 'paid', total: '19.90' }], count: 1, total: 1 } },
});

export const EmptyBody = t.Optional(t.Object({}, { description: 'Empty JSON object.' }));

export const TxParams = t.Object({ id: t.String({ description: 'transaction_id from begin.' }) });

export const BeginResult = ok(
  t.Object({
    transaction_id: t.String({ description: 'Pass as transaction_id in queries, and in the commit/rollback path.' }),
    expires_at: t.String({
      description: 'ISO 8601; the transaction is rolled back if idle past this time. Each query extends it.',
    }),
  }),
  {
    title: 'DbTransactionBegun',
    example: {
      success: true,
      data: { transaction_id: '6f1c2a9e-3b4d-4e8f-9a0b-1c2d3e4f5a6b', expires_at: '2026-01-01T12:00:30.000Z' },
    },
  },
);

export const EndResult = ok(
  t.Object({
    transaction_id: t.String(),
    status: t.String({ enum: ['committed', 'rolled_back'], description: 'committed or rolled_back.' }),
  }),
  {
    title: 'DbTransactionEnded',
    example: { success: true, data: { transaction_id: '6f1c2a9e-3b4d-4e8f-9a0b-1c2d3e4f5a6b', status: 'committed' } },
  },
);
