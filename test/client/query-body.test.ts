/**
 * The request bodies the JS client sends for the query features of docs/database.md that
 * the server may not answer yet (OR/NOT groups, `expand`, `aggregate`): exactly the fields
 * the Database API defines. Checked on the bodies; the suites against the server
 * (test/client/client.test.ts) run the rest.
 */
import { describe, expect, test } from 'bun:test';
import { createClient } from '../../clients/js/src/client';

const b = createClient('http://127.0.0.1:1', { storage: 'memory' });

describe('the JS client builds Database API bodies', () => {
  test('filters with OR, AND and NOT groups, every operator', () => {
    const q = b
      .from('tasks')
      .select(['id'], { total: true })
      .eq('done', false)
      .or((g) => g.gte('priority', 3).lt('due', '2026-12-01'))
      .not((g) => g.in('status', ['a', 'b']))
      .not((g) => g.isNull('owner', false).and((h) => h.like('t', 'x%').ilike('u', '%y')))
      .neq('a', 1)
      .gt('b', 2)
      .lte('c', 3)
      .notIn('d', [4])
      .order('created_at', 'desc')
      .limit(20)
      .offset(40);
    expect(q.request()).toEqual({
      entity: 'tasks',
      action: 'select',
      fields: ['id'],
      total: true,
      sort: [{ field: 'created_at', direction: 'desc' }],
      limit: 20,
      offset: 40,
      filters: [
        { field: 'done', op: 'eq', value: false },
        {
          or: [
            { field: 'priority', op: 'gte', value: 3 },
            { field: 'due', op: 'lt', value: '2026-12-01' },
          ],
        },
        { not: { field: 'status', op: 'in', value: ['a', 'b'] } },
        {
          not: {
            and: [
              { field: 'owner', op: 'is_null', value: false },
              {
                and: [
                  { field: 't', op: 'like', value: 'x%' },
                  { field: 'u', op: 'ilike', value: '%y' },
                ],
              },
            ],
          },
        },
        { field: 'a', op: 'neq', value: 1 },
        { field: 'b', op: 'gt', value: 2 },
        { field: 'c', op: 'lte', value: 3 },
        { field: 'd', op: 'not_in', value: [4] },
      ],
    });
  });

  test('expand: many-to-one and one-to-many, narrowed and nested', () => {
    const q = b
      .from('posts')
      .select(['id', 'title'])
      .expand('author_id', ['id', 'name'])
      .expand('comments_via_post_id', ['id', 'body'], (c) =>
        c.eq('hidden', false).order('created_at', 'desc').limit(3).expand('author_id', ['name']),
      )
      .limit(20);
    expect(q.request()).toEqual({
      entity: 'posts',
      action: 'select',
      fields: ['id', 'title'],
      limit: 20,
      expand: {
        author_id: { fields: ['id', 'name'] },
        comments_via_post_id: {
          fields: ['id', 'body'],
          filters: [{ field: 'hidden', op: 'eq', value: false }],
          sort: [{ field: 'created_at', direction: 'desc' }],
          limit: 3,
          expand: { author_id: { fields: ['name'] } },
        },
      },
    });
  });

  test('aggregate: functions, group_by, having, sort', () => {
    const q = b
      .from('orders')
      .aggregate({ count: 'orders', sum: { total: 'revenue' }, count_distinct: { customer_id: 'customers' } })
      .groupBy('status', 'customer_id.country')
      .gte('created_at', '2026-01-01T00:00:00Z')
      .having((h) => h.gt('revenue', 100))
      .order('revenue', 'desc')
      .limit(10);
    expect(q.request()).toEqual({
      entity: 'orders',
      action: 'aggregate',
      aggregates: [
        { fn: 'count', as: 'orders' },
        { fn: 'sum', field: 'total', as: 'revenue' },
        { fn: 'count_distinct', field: 'customer_id', as: 'customers' },
      ],
      group_by: ['status', 'customer_id.country'],
      filters: [{ field: 'created_at', op: 'gte', value: '2026-01-01T00:00:00Z' }],
      having: [{ field: 'revenue', op: 'gt', value: 100 }],
      sort: [{ field: 'revenue', direction: 'desc' }],
      limit: 10,
    });
  });

  test('writes: insert one or many, update and delete with filters', () => {
    expect(
      b
        .from('n')
        .insert([{ a: 1 }, { a: 2 }], ['id'])
        .request(),
    ).toEqual({
      entity: 'n',
      action: 'insert',
      data: [{ a: 1 }, { a: 2 }],
      fields: ['id'],
    });
    expect(b.from('n').update({ a: 3 }).eq('id', 1).request()).toEqual({
      entity: 'n',
      action: 'update',
      data: { a: 3 },
      filters: [{ field: 'id', op: 'eq', value: 1 }],
    });
    expect(b.from('n').delete().eq('id', 1).request()).toEqual({
      entity: 'n',
      action: 'delete',
      filters: [{ field: 'id', op: 'eq', value: 1 }],
    });
  });
});
