/**
 * The query builder's select shapes (src/modules/database/query-builder.ts): a repeated
 * shape reuses its statement text and binds only its values. No database: the answer of a
 * cached shape must be the answer a fresh build gives, statement or refusal alike.
 */
import { describe, expect, test } from 'bun:test';
import { buildStatement } from '../../src/modules/database/query-builder';
import { selectExpr } from '../../src/modules/database/value-codec';
import { quoteIdent } from '../../src/db/engine';
import type { Column, Table, ValueKind } from '../../src/modules/database/catalog-types';

function column(name: string, kind: ValueKind, castType: string, isArray = false): Column {
  const c: Column = {
    name,
    castType,
    fullType: castType,
    kind,
    isArray,
    notNull: false,
    maxLength: null,
    quoted: quoteIdent(name),
    select: '',
    hasDefault: false,
  };
  c.select = selectExpr(c);
  return c;
}

/** A fresh table object, as a catalog load makes one (so it has no shapes yet). */
function table(): Table {
  const cols = [
    column('id', 'int', 'integer'),
    column('grp', 'int', 'integer'),
    column('name', 'text', 'text'),
    column('tags', 'text', 'text', true),
    column('doc', 'json', 'jsonb'),
    column('at', 'timestamptz', 'timestamp with time zone'),
  ];
  return {
    name: 'items',
    columns: new Map(cols.map((c) => [c.name, c])),
    columnList: cols,
    quoted: quoteIdent('items'),
    selectAll: cols.map((c) => c.select).join(', '),
    primaryKey: ['id'],
    privileges: {},
    rls: false,
  };
}

/** The statement, or the refusal as the API answers it. */
function outcome(body: object, t: Table, maxLimit = 1000): unknown {
  try {
    const st = buildStatement(body as never, t, { maxLimit });
    return { ...st };
  } catch (e) {
    const err = e as { status?: number; code?: string; message: string; extra?: unknown };
    return { status: err.status, code: err.code, message: err.message, extra: err.extra };
  }
}

const select = (more: object) => ({ entity: 'items', action: 'select', ...more });

// Each pair: a body that builds (its shape is cached), then bodies of the same shape with other values.
const SAME_SHAPE: [object, object[]][] = [
  [
    select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq', value: 1 }], limit: 10 }),
    [
      select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq', value: 2 }], limit: 10 }),
      select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq', value: 'x' }], limit: 10 }),
      select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq', value: null }], limit: 10 }),
      select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq' }], limit: 10 }),
      select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq', value: 3 }], limit: 5000 }),
      select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq', value: 3 }], limit: -1 }),
      select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq', value: 3 }], offset: 1.5 }),
      select({ fields: ['id', 'name'], filters: [{ field: 'grp', op: 'eq', value: 3 }], offset: 20 }),
    ],
  ],
  [
    select({
      filters: [
        { field: 'name', op: 'like', value: 'a%' },
        { field: 'grp', op: 'in', value: [1, 2] },
        { field: 'at', op: 'is_null', value: false },
      ],
      sort: [{ field: 'grp', direction: 'DESC' }, { field: 'id' }],
      total: true,
    }),
    [
      select({
        filters: [
          { field: 'name', op: 'like', value: 7 },
          { field: 'grp', op: 'in', value: [1, 2] },
          { field: 'at', op: 'is_null', value: false },
        ],
        sort: [{ field: 'grp', direction: 'desc' }, { field: 'id' }],
        total: true,
      }),
      select({
        filters: [
          { field: 'name', op: 'like', value: 'b_' },
          { field: 'grp', op: 'in', value: [] },
          { field: 'at', op: 'is_null', value: false },
        ],
        sort: [
          { field: 'grp', direction: 'desc' },
          { field: 'id', direction: 'asc' },
        ],
        total: true,
      }),
      select({
        filters: [
          { field: 'name', op: 'like', value: 'b_' },
          { field: 'grp', op: 'in', value: [1, null] },
          { field: 'at', op: 'is_null', value: false },
        ],
        sort: [{ field: 'grp', direction: 'Desc' }, { field: 'id' }],
        total: true,
      }),
      select({
        filters: [
          { field: 'name', op: 'like', value: 'b_' },
          { field: 'grp', op: 'in', value: [1, [2]] },
          { field: 'at', op: 'is_null', value: false },
        ],
        sort: [{ field: 'grp', direction: 'desc' }, { field: 'id' }],
        total: true,
      }),
      select({
        filters: [
          { field: 'name', op: 'like', value: '%' },
          { field: 'grp', op: 'in', value: ['9', 8] },
          { field: 'at', op: 'is_null', value: false },
        ],
        sort: [{ field: 'grp', direction: 'desc' }, { field: 'id' }],
        total: true,
        limit: 3,
        offset: 6,
      }),
    ],
  ],
];

// Bodies whose shape differs from a cached one only where the builder must refuse or build anew.
const OTHER_SHAPES: object[] = [
  select({ fields: ['id', 'nope'], filters: [{ field: 'grp', op: 'eq', value: 1 }] }),
  select({ fields: ['id'], filters: [{ field: 'grp', op: 'eq', value: 1 }], data: { id: 1 } }),
  select({ fields: ['id'], filters: [{ field: 'grp', op: 'bogus', value: 1 }] }),
  select({ fields: ['id'], filters: [{ field: 'grp', op: 'eq', value: 1, extra: 1 }] }),
  select({ fields: ['id'], filters: [{ field: 'at', op: 'is_null', value: true }] }),
  select({ fields: ['id'], filters: [{ field: 'at', op: 'is_null', value: 'yes' }] }),
  select({ fields: ['id'], filters: [{ field: 'doc', op: 'gt', value: 1 }] }),
  select({ fields: ['id'], filters: [{ field: 'tags', op: 'in', value: ['a'] }] }),
  select({ fields: ['id'], filters: [{ field: 'grp', op: 'like', value: 'a' }] }),
  select({ fields: ['id'], sort: [{ field: 'id', direction: 'up' }] }),
  select({ fields: ['id'], total: 'yes' }),
  select({ fields: [] }),
  select({ fields: [''] }),
  // Names that would run together in a key made by joining them.
  select({ fields: ['id', 'grp'] }),
  select({ fields: ['idgrp'] }),
  select({ fields: ['id'], filters: [{ field: 'grp', op: 'eq', value: 1 }] }),
  select({ fields: ['id', 2, 'eq', 'grp'] }),
];

describe('select shapes', () => {
  test('a cached shape answers as a fresh build: statement, values and refusals', () => {
    const t = table();
    for (const [first, others] of SAME_SHAPE) {
      expect(outcome(first, t)).toEqual(outcome(first, table()));
      // The same table (its shape cached) against a fresh table object (nothing cached).
      for (const body of [...others, first]) expect(outcome(body, t)).toEqual(outcome(body, table()));
    }
    for (const body of OTHER_SHAPES) {
      expect(outcome(body, t)).toEqual(outcome(body, table()));
      expect(outcome(body, t)).toEqual(outcome(body, table()));
    }
  });

  test('statements of a cached shape do not share their values', () => {
    const t = table();
    const a = buildStatement(select({ filters: [{ field: 'grp', op: 'eq', value: 1 }] }) as never, t, {
      maxLimit: 1000,
    });
    const b = buildStatement(select({ filters: [{ field: 'grp', op: 'eq', value: 2 }] }) as never, t, {
      maxLimit: 1000,
    });
    expect(a.sql).toBe(b.sql);
    expect(a.params).toEqual(['1', 100, 0]);
    expect(b.params).toEqual(['2', 100, 0]);
  });

  test('db.max_limit is read per request, not kept with the shape', () => {
    const t = table();
    const body = select({ fields: ['id'], limit: 50 });
    expect(outcome(body, t, 1000)).toMatchObject({ params: [50, 0] });
    expect(outcome(body, t, 10)).toMatchObject({ code: 'validation_error' });
  });

  test('a reloaded catalog (a new table object) builds against its own columns', () => {
    const before = table();
    const body = select({ fields: ['id', 'name'] });
    expect(buildStatement(body as never, before, { maxLimit: 1000 }).sql).toContain('"name"');
    // The column was renamed: the new snapshot does not know it, whatever the old one cached.
    const after = table();
    const renamed = after.columns.get('name')!;
    after.columns.delete('name');
    after.columns.set('title', { ...renamed, name: 'title', quoted: '"title"', select: '"title"' });
    expect(outcome(body, after)).toMatchObject({ message: expect.stringContaining('name') });
  });
});
