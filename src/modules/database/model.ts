/**
 * Schemas of the Database API: request validation, types and the OpenAPI document
 * come from these declarations. Operator, action and direction are plain strings
 * with an `enum` for the document, checked by the service so the error names the
 * exact position (`filters[2].op`) and lists what is allowed.
 */
import { t, type Static, type TSchema } from 'elysia';
// TypeBox's own Integer: Elysia's `t.Integer` also accepts digit strings and is a
// transform, which makes every body go through a decode pass (bench/db-query.ts).
import { Type } from '@sinclair/typebox';
import { AREA } from '../../http/areas';
import { successOf } from '../../http/envelope-schemas';

export const ACTIONS = ['select', 'insert', 'update', 'delete', 'aggregate'] as const;
export const AGGREGATE_FNS = ['count', 'count_distinct', 'sum', 'avg', 'min', 'max'] as const;
export const OPERATORS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'like', 'ilike', 'is_null'] as const;
export const DIRECTIONS = ['asc', 'desc'] as const;
export type Action = (typeof ACTIONS)[number];
export type Operator = (typeof OPERATORS)[number];
export type AggregateFn = (typeof AGGREGATE_FNS)[number];

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
 * A part of the request the service checks itself, so a refusal names its exact position
 * (`filters[1].or[0].op`, `expand.author_id.limit`): accepted as is by body validation (an
 * unknown schema), described to the document as `allOf` its one schema beside a description.
 * Not `anyOf` or the schema itself: body normalization reads those and would drop the keys it
 * does not know, which the service must name.
 */
const checkedByService = (described: TSchema, description: string) => t.Unknown({ allOf: [described], description });

/**
 * Bounds of a request (docs/database.md): groups nest at most 4 levels and hold 100 items in
 * all; relations go 3 levels deep, 10 in a request, a one-to-many one 10 rows by default;
 * at most 100,000 related rows in an answer, counted from the limits before anything runs
 * (the entity's limit times each one-to-many relation's along its path, summed over the
 * relations); paths follow at most 3 relations; at most 50 aggregates. The query builder applies them;
 * the document's schemas are unrolled to the depths (no cycles).
 */
export const QUERY_BOUNDS = {
  groupDepth: 4,
  filterItems: 100,
  expandDepth: 3,
  relations: 10,
  pathHops: 3,
  aggregates: 50,
  expandLimit: 10,
  expandedRows: 100_000,
} as const;
const { groupDepth: GROUP_DEPTH, expandDepth: EXPAND_DEPTH } = QUERY_BOUNDS;

const GROUP_ITEMS = 'Filter items (conditions or groups); groups nest at most 4 levels, 100 items in all.';
/** A filter item inside `depth` groups: a condition, or (while groups may still nest) a group. */
const filterItem = (depth: number): TSchema => {
  if (depth === GROUP_DEPTH) return Filter;
  const inner = filterItem(depth + 1);
  return t.Union(
    [
      Filter,
      t.Object(
        { or: t.Array(inner, { description: `At least one item holds. ${GROUP_ITEMS}` }) },
        { title: 'DbFilterOr', additionalProperties: false },
      ),
      t.Object(
        { and: t.Array(inner, { description: `Every item holds. ${GROUP_ITEMS}` }) },
        { title: 'DbFilterAnd', additionalProperties: false },
      ),
      t.Object({ not: inner }, { title: 'DbFilterNot', additionalProperties: false }),
    ],
    {
      title: 'DbFilterItem',
      description:
        'A condition {field, op, value} (field: a column, or a dotted path through relations such as author_id.name), or a group {or: [...]}, {and: [...]}, {not: item}.',
    },
  );
};
export const FilterItem = filterItem(0);

/** What to read of a relation `depth` levels below the entity (1 to 3). */
const relation = (depth: number): TSchema =>
  t.Object(
    {
      fields: t.Optional(
        t.Array(t.String(), { description: 'Columns of the related table (all readable when omitted).' }),
      ),
      filters: t.Optional(t.Array(FilterItem, { description: 'Conditions on the related rows.' })),
      sort: t.Optional(t.Array(Sort, { description: "Order of a one-to-many relation's rows." })),
      limit: t.Optional(
        Type.Integer({ minimum: 0, description: 'One-to-many: rows per parent; default 10, at most db.max_limit.' }),
      ),
      offset: t.Optional(Type.Integer({ minimum: 0, description: 'One-to-many: rows to skip per parent.' })),
      total: t.Optional(
        t.Boolean({ description: 'One-to-many: also return expand.<name>_total, the related rows matching.' }),
      ),
      ...(depth < EXPAND_DEPTH ? { expand: t.Optional(expandOf(depth + 1)) } : {}),
    },
    { title: 'DbRelation', additionalProperties: false },
  );

const expandOf = (depth: number): TSchema =>
  t.Record(t.String(), relation(depth), {
    title: 'DbExpand',
    description:
      "select: relation name → what to read of it. Many-to-one: the foreign key column's name (author_id), answered as an object or null; one-to-many: <table>_via_<its column> (comments_via_post_id), answered as an array. At most 10 relations, 3 levels deep.",
  });
export const Expand = expandOf(1);

export const Aggregate = t.Object(
  {
    fn: t.String({ enum: [...AGGREGATE_FNS], description: 'count, count_distinct, sum, avg, min or max.' }),
    field: t.Optional(t.String({ description: 'Column (or many-to-one dotted path); count without it counts rows.' })),
    as: t.Optional(
      t.String({
        pattern: '^[A-Za-z0-9_]{1,63}$',
        description: 'Output column name; default <fn>_<field>, or count.',
      }),
    ),
  },
  { title: 'DbAggregate', additionalProperties: false },
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
    action: t.String({ enum: [...ACTIONS], description: 'select, insert, update, delete or aggregate.' }),
    fields: t.Optional(
      t.Array(t.String(), {
        description: 'Columns to return (all columns when omitted); narrows RETURNING for insert/update/delete.',
      }),
    ),
    filters: t.Optional(
      t.Array(checkedByService(FilterItem, 'A condition or a group.'), {
        description:
          'Conditions, all of which must hold (AND); groups {or}, {and}, {not} nest. Required for update and delete.',
      }),
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
    expand: t.Optional(checkedByService(Expand, 'select: related rows to read in the same statement.')),
    group_by: t.Optional(
      t.Array(t.String(), {
        description: 'aggregate: group columns, or many-to-one dotted paths (customer_id.country).',
      }),
    ),
    aggregates: t.Optional(
      t.Array(checkedByService(Aggregate, 'One aggregate.'), {
        description: 'aggregate: the values computed per group.',
      }),
    ),
    having: t.Optional(
      t.Array(checkedByService(FilterItem, 'A condition or a group.'), {
        description: "aggregate: conditions on the groups, over the aggregates' names and the group columns.",
      }),
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

/** A row of an answer: its columns (or an aggregate's group columns and aggregates), and the relations asked for. */
const ResultRow = t.Object(
  {
    expand: t.Optional(
      t.Record(t.String(), t.Unknown(), {
        title: 'DbExpanded',
        description:
          'select with expand: relation name → the related row (object, or null when there is none or it is not visible) for many-to-one, an array of rows for one-to-many, and <name>_total when asked. Related rows carry their own expand.',
      }),
    ),
  },
  {
    title: 'DbResultRow',
    additionalProperties: true,
    description:
      'Column name → value (see docs/database.md for the representation of each type); aggregate: group columns (named as given, e.g. customer_id.country) and aggregates (named by as).',
  },
);

/** The `data` of a query's answer. */
export const QueryResultData = t.Object({
  rows: t.Array(ResultRow, {
    description:
      'Selected rows, the inserted/updated/deleted rows (RETURNING) narrowed by fields, or the groups of an aggregate.',
  }),
  count: Type.Integer({ description: 'Rows returned (select) or affected (insert/update/delete).' }),
  total: t.Optional(
    Type.Integer({
      description: 'select/aggregate with total:true: rows (groups) matching, ignoring limit/offset.',
    }),
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
