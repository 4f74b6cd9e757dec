/**
 * Relations (`expand`), aggregates and boolean groups of the Database API (docs/database.md),
 * through HTTP on both engines: the spec's examples as written, the value representation of
 * related rows, whitelists and grants on every table reached, row-level security inside
 * relations and aggregates, errors naming their position, and one statement per request
 * (counted in process: `ON_SOURCE`).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { signInUser, type SignedInUser } from '../helpers/users';
import { expectA } from '../helpers/envelopes';
import { expectError } from './fixtures';
import { dbQuery, type Who } from './user-data.fixtures';
import { ANN, BO, RELATIONS_MIGRATION } from './relations.fixtures';

describe.each(ENGINES)('relations, aggregates and groups on %s', (engine) => {
  let s: TestServer;
  let key: string;
  let postsOnly: string;
  let alice: SignedInUser;
  let bob: SignedInUser;
  const q = (body: unknown, who: Who = key) => dbQuery(s, who, body);
  const ok = async (body: unknown, who: Who = key) => expectA(await q(body, who), 200);

  beforeAll(async () => {
    s = await startServer(engine, { migrations: { '001_relations.sql': RELATIONS_MIGRATION } });
    const tables = [
      ...['authors', 'posts', 'comments', 'customers', 'orders', 'tasks', 'lists', 'entries', 'stamps'],
      ...['regions', 'shops'],
    ];
    key = await createKey(s, { type: 'service', service: 'blog', permissions: ['db:query'], tables });
    postsOnly = await createKey(s, { type: 'service', service: 'posts', permissions: ['db:query'], tables: ['posts'] });
    [alice, bob] = [await signInUser(s), await signInUser(s)];
  }, 240_000);
  afterAll(() => s.stop());

  describe('boolean groups', () => {
    test("the spec's example: not done, and high priority or due soon", async () => {
      const r = await ok({
        entity: 'tasks',
        action: 'select',
        fields: ['title'],
        filters: [
          { field: 'done', op: 'eq', value: false },
          {
            or: [
              { field: 'priority', op: 'gte', value: 3 },
              { field: 'due', op: 'lt', value: '2026-12-01' },
            ],
          },
        ],
        sort: [{ field: 'id' }],
      });
      expect(r.rows).toEqual([{ title: 'urgent' }, { title: 'soon' }]);
    });

    test('not and nested and: on select, update and delete', async () => {
      const notDone = {
        not: {
          or: [
            { field: 'done', op: 'eq', value: true },
            { field: 'priority', op: 'is_null', value: true },
          ],
        },
      };
      const sel = await ok({
        entity: 'tasks',
        action: 'select',
        fields: ['title'],
        filters: [notDone],
        sort: [{ field: 'id' }],
      });
      expect(sel.rows.map((x: { title: string }) => x.title)).toEqual(['urgent', 'soon', 'later']);
      const up = await ok({
        entity: 'tasks',
        action: 'update',
        data: { priority: 2 },
        fields: ['title'],
        filters: [{ and: [{ field: 'title', op: 'like', value: 'l%' }, notDone] }],
      });
      expect(up.rows).toEqual([{ title: 'later' }]);
      const del = await ok({
        entity: 'tasks',
        action: 'delete',
        fields: ['title'],
        filters: [
          {
            or: [{ field: 'title', op: 'eq', value: 'nothing' }, { and: [{ field: 'priority', op: 'eq', value: 99 }] }],
          },
        ],
      });
      expect(del.count).toBe(0);
    });

    test.each([
      ['an empty group', [{ or: [] }], 'filters[0].or'],
      [
        'a bad operator inside',
        [{ field: 'done', op: 'eq', value: true }, { or: [{ field: 'title', op: 'near', value: 1 }] }],
        'filters[1].or[0].op',
      ],
      ['an unknown column inside not', [{ not: { field: 'nope', op: 'eq', value: 1 } }], 'filters[0].not.field'],
      ['a key beside the group', [{ or: [{ field: 'done', op: 'eq', value: true }], and: [] }], 'filters[0].and'],
      [
        'five levels',
        [{ not: { not: { not: { not: { not: { field: 'done', op: 'eq', value: true } } } } } }],
        'filters[0].not.not.not.not.not',
      ],
      [
        'more than 100 items',
        [{ or: Array.from({ length: 100 }, () => ({ field: 'done', op: 'eq', value: true })) }],
        'filters[0].or[99]',
      ],
    ])('%s → 400 naming the position', async (_name, filters, at) => {
      const r = await q({ entity: 'tasks', action: 'select', filters });
      expectError(r, 400, 'validation_error');
      expect(Object.keys(r.body.error.details.fields)).toEqual([at]);
    });

    test('raw SQL inside a group is refused as anywhere else', async () => {
      const r = await q({ entity: 'tasks', action: 'select', filters: [{ or: [{ not: { query: 'SELECT 1' } }] }] });
      expectError(r, 403, 'raw_sql_disabled');
    });
  });

  describe('expand', () => {
    test("the spec's example: a post page with its author and latest comments", async () => {
      const r = await ok({
        entity: 'posts',
        action: 'select',
        fields: ['id', 'title', 'author_id'],
        expand: {
          author_id: { fields: ['id', 'name'] },
          comments_via_post_id: {
            fields: ['id', 'body', 'created_at'],
            filters: [{ field: 'hidden', op: 'eq', value: false }],
            sort: [{ field: 'created_at', direction: 'desc' }],
            limit: 3,
            total: true,
            expand: { author_id: { fields: ['name'] } },
          },
        },
        sort: [{ field: 'id' }],
        limit: 20,
      });
      expect(r.count).toBe(3);
      const [hello, quiet, orphan] = r.rows;
      expect(hello).toEqual({
        id: 1,
        title: 'Hello',
        author_id: ANN,
        expand: {
          author_id: { id: ANN, name: 'Ann' },
          comments_via_post_id: [
            { id: 12, body: 'c12', created_at: '2026-03-01T12:00:00Z', expand: { author_id: { name: 'Bo' } } },
            { id: 11, body: 'c11', created_at: '2026-03-01T11:00:00Z', expand: { author_id: { name: 'Ann' } } },
            { id: 10, body: 'c10', created_at: '2026-03-01T10:00:00Z', expand: { author_id: { name: 'Ann' } } },
          ],
          comments_via_post_id_total: 12,
        },
      });
      expect(quiet.expand).toEqual({
        author_id: { id: BO, name: 'Bo' },
        comments_via_post_id: [],
        comments_via_post_id_total: 0,
      });
      expect(orphan.expand.author_id).toBeNull();
    });

    test('related rows keep the value representation; two keys to one table are told apart', async () => {
      const r = await ok({
        entity: 'posts',
        action: 'select',
        fields: ['title'],
        filters: [{ field: 'id', op: 'eq', value: 1 }],
        expand: { author_id: {}, editor_id: { fields: ['name'] } },
      });
      expect(r.rows[0]).toEqual({
        title: 'Hello',
        expand: {
          author_id: {
            id: ANN,
            name: 'Ann',
            karma: '9007199254740993',
            joined: '2026-01-02T03:04:05.123456Z',
            avatar: Buffer.from([1, 255]).toString('base64'),
            tags: ['a', null, 'b c'],
            score: '12.50',
          },
          editor_id: { name: 'Bo' },
        },
      });
      // The same author read directly answers the same values.
      const direct = await ok({
        entity: 'authors',
        action: 'select',
        filters: [{ field: 'id', op: 'eq', value: ANN }],
      });
      expect(direct.rows[0]).toEqual(r.rows[0].expand.author_id);
    });

    test('a two-column key: both columns join, both ways', async () => {
      const shops = await ok({
        entity: 'shops',
        action: 'select',
        fields: ['label'],
        sort: [{ field: 'id' }],
        expand: { country: { fields: ['name'] } },
      });
      expect(shops.rows.map((r: { expand: { country: { name: string } } }) => r.expand.country.name)).toEqual([
        'Paris',
        'Lyon',
        'Paris',
      ]);
      const regions = await ok({
        entity: 'regions',
        action: 'select',
        fields: ['name'],
        sort: [{ field: 'name' }],
        expand: { shops_via_country: { fields: ['label'], sort: [{ field: 'label' }], total: true } },
      });
      expect(
        regions.rows.map((r: { expand: { shops_via_country_total: number } }) => r.expand.shops_via_country_total),
      ).toEqual([0, 1, 2]);
    });

    test('one-to-many paging, a many-to-one back, and depth', async () => {
      const r = await ok({
        entity: 'authors',
        action: 'select',
        fields: ['name'],
        filters: [{ field: 'name', op: 'eq', value: 'Ann' }],
        expand: {
          posts_via_author_id: {
            fields: ['title'],
            expand: {
              comments_via_post_id: {
                fields: ['body'],
                sort: [{ field: 'id' }],
                limit: 2,
                offset: 1,
                expand: { post_id: { fields: ['title'] } },
              },
            },
          },
        },
      });
      expect(r.rows[0].expand.posts_via_author_id).toEqual([
        {
          title: 'Hello',
          expand: {
            comments_via_post_id: [
              { body: 'c2', expand: { post_id: { title: 'Hello' } } },
              { body: 'c3', expand: { post_id: { title: 'Hello' } } },
            ],
          },
        },
      ]);
    });

    test('dotted paths: filters and sort through many-to-one, "at least one" through one-to-many', async () => {
      const byAuthor = await ok({
        entity: 'comments',
        action: 'select',
        fields: ['body'],
        filters: [
          { field: 'post_id.author_id.name', op: 'eq', value: 'Ann' },
          { field: 'author_id.name', op: 'eq', value: 'Bo' },
        ],
        sort: [{ field: 'post_id.title' }, { field: 'id' }],
      });
      expect(byAuthor.rows).toEqual([{ body: 'c12' }, { body: 'spam' }]);
      const withSpam = await ok({
        entity: 'posts',
        action: 'select',
        fields: ['title'],
        filters: [{ field: 'comments_via_post_id.body', op: 'eq', value: 'spam' }],
      });
      expect(withSpam.rows).toEqual([{ title: 'Hello' }]);
      const sortedByAuthor = await ok({
        entity: 'posts',
        action: 'select',
        fields: ['title'],
        filters: [{ field: 'author_id', op: 'is_null', value: false }],
        sort: [{ field: 'author_id.name', direction: 'desc' }],
      });
      expect(sortedByAuthor.rows).toEqual([{ title: 'Quiet' }, { title: 'Hello' }]);
    });

    test.each([
      [
        'an unknown relation',
        { expand: { writer: {} } },
        'expand.writer',
        /its relations: author_id, comments_via_post_id, editor_id/,
      ],
      ['limit on many-to-one', { expand: { author_id: { limit: 1 } } }, 'expand.author_id.limit', /many-to-one/],
      [
        'an unknown column of a relation',
        { expand: { author_id: { fields: ['nope'] } } },
        'expand.author_id.fields[0]',
        /authors/,
      ],
      [
        'depth 4',
        {
          expand: {
            comments_via_post_id: {
              expand: { post_id: { expand: { author_id: { expand: { posts_via_author_id: {} } } } } },
            },
          },
        },
        'expand.comments_via_post_id.expand.post_id.expand.author_id.expand',
        /3 levels/,
      ],
      ['a one-to-many sort path', { sort: [{ field: 'comments_via_post_id.body' }] }, 'sort[0].field', /one-to-many/],
      [
        'four hops',
        { filters: [{ field: 'author_id.posts_via_author_id.author_id.name.x', op: 'eq', value: 1 }] },
        'filters[0].field',
        /at most 3/,
      ],
    ])('%s → 400 naming it', async (_name, extra, at, message) => {
      const r = await q({ entity: 'posts', action: 'select', ...extra });
      expectError(r, 400, 'validation_error');
      expect(Object.keys(r.body.error.details.fields)).toEqual([at]);
      expect(JSON.stringify(r.body.error.details.fields)).toMatch(message);
    });

    test('the limits along a path multiply: an answer of too many related rows is refused before it runs', async () => {
      const body = (limit: number) => ({
        entity: 'authors',
        action: 'select',
        limit: 1000,
        expand: {
          posts_via_author_id: { limit: 10, expand: { comments_via_post_id: { limit } } },
        },
      });
      // 1,000 authors × 10 posts × 10 comments = 100,000, plus the 10,000 posts: over the bound.
      const r = await q(body(10));
      expectError(r, 400, 'validation_error');
      const at = 'expand.posts_via_author_id.expand.comments_via_post_id.limit';
      expect(r.body.error.details.fields[at]).toContain('at most 100,000');
      expect(r.body.error.details.fields[at]).toContain('110,000');
      await ok(body(8)); // 10,000 + 80,000
    });

    test('expand on another action is refused like any unused key', async () => {
      const r = await q({
        entity: 'posts',
        action: 'delete',
        filters: [{ field: 'id', op: 'eq', value: 99 }],
        expand: { author_id: {} },
      });
      expectError(r, 400, 'validation_error');
      expect(r.body.error.details.fields).toHaveProperty('expand');
    });

    test('a service key: every table reached must be in its whitelist', async () => {
      expectA(await q({ entity: 'posts', action: 'select', fields: ['title'] }, postsOnly), 200);
      for (const body of [
        { expand: { author_id: {} } },
        { filters: [{ field: 'author_id.name', op: 'eq', value: 'Ann' }] },
        { sort: [{ field: 'author_id.name' }] },
      ]) {
        const r = await q({ entity: 'posts', action: 'select', ...body }, postsOnly);
        expectError(r, 403, 'forbidden');
        expect(r.body.error.message).toContain("'authors'");
      }
      // An unknown relation's 400 names no table outside the whitelist (authors, comments).
      const unknown = await q({ entity: 'posts', action: 'select', expand: { writer: {} } }, postsOnly);
      expectError(unknown, 400, 'validation_error');
      expect(unknown.body.error.details.fields['expand.writer']).toContain('no relation you may follow');
      expect(JSON.stringify(unknown.body)).not.toMatch(/author_id|comments/);
    });
  });

  describe('aggregate', () => {
    test("the spec's example: revenue per status and country", async () => {
      const r = await ok({
        entity: 'orders',
        action: 'aggregate',
        group_by: ['status', 'customer_id.country'],
        aggregates: [
          { fn: 'count', as: 'orders' },
          { fn: 'sum', field: 'total', as: 'revenue' },
          { fn: 'count_distinct', field: 'customer_id', as: 'customers' },
        ],
        filters: [{ field: 'created_at', op: 'gte', value: '2026-01-01T00:00:00Z' }],
        having: [{ field: 'revenue', op: 'gt', value: 100 }],
        sort: [{ field: 'revenue', direction: 'desc' }],
        limit: 10,
        total: true,
      });
      expect(r.rows[0]).toEqual({
        status: 'paid',
        'customer_id.country': 'FR',
        orders: 12,
        revenue: '1530.00',
        customers: 7,
      });
      expect(r.rows.map((x: { revenue: string }) => x.revenue)).toEqual(['1530.00', '800.00', '150.00', '120.00']);
      expect([r.count, r.total]).toEqual([4, 4]);
    });

    test('one row over all rows; types of min, max and avg; paging keeps the total', async () => {
      const all = await ok({
        entity: 'orders',
        action: 'aggregate',
        aggregates: [
          { fn: 'count' },
          { fn: 'count', field: 'weight' },
          { fn: 'min', field: 'created_at' },
          { fn: 'max', field: 'total' },
          { fn: 'avg', field: 'weight' },
        ],
      });
      expect(all.rows).toEqual([
        {
          count: 20,
          count_weight: 14,
          min_created_at: '2025-06-01T00:00:00Z',
          max_total: '999.00',
          avg_weight: 1.5714285714285714,
        },
      ]);
      const page = await ok({
        entity: 'orders',
        action: 'aggregate',
        group_by: ['status'],
        aggregates: [{ fn: 'count', as: 'n' }],
        having: [
          {
            or: [
              { field: 'n', op: 'gte', value: 4 },
              { field: 'status', op: 'eq', value: 'refunded' },
            ],
          },
        ],
        sort: [{ field: 'status' }],
        offset: 5,
        total: true,
      });
      expect(page).toEqual({ rows: [], count: 0, total: 3 });
    });

    test.each([
      [
        'sum of text',
        { aggregates: [{ fn: 'sum', field: 'status' }] },
        'aggregates[0].field',
        /sum applies to number columns; 'status' is text/,
      ],
      ['avg of boolean', { aggregates: [{ fn: 'avg', field: 'paid' }] }, 'aggregates[0].field', /'paid' is boolean/],
      [
        'a clashing name',
        { group_by: ['status'], aggregates: [{ fn: 'count', as: 'status' }] },
        'aggregates[0].as',
        /taken/,
      ],
      ['a bad name', { aggregates: [{ fn: 'count', as: 'a-b' }] }, 'aggregates[0].as', /a-z/],
      [
        'having on a table column',
        { aggregates: [{ fn: 'count' }], having: [{ field: 'total', op: 'gt', value: 1 }] },
        'having[0].field',
        /count/,
      ],
      [
        'sort by a table column',
        { aggregates: [{ fn: 'count' }], sort: [{ field: 'total' }] },
        'sort[0].field',
        /count/,
      ],
      ['no aggregates', { group_by: ['status'] }, 'aggregates', /non-empty/],
      ['expand', { aggregates: [{ fn: 'count' }], expand: { customer_id: {} } }, 'expand', /not used by aggregate/],
    ])('%s → 400 naming it', async (_name, extra, at, message) => {
      const r = await q({ entity: 'orders', action: 'aggregate', ...extra });
      expectError(r, 400, 'validation_error');
      expect(Object.keys(r.body.error.details.fields)).toEqual([at]);
      expect(JSON.stringify(r.body.error.details.fields)).toMatch(message);
    });
  });

  describe("users' own data", () => {
    let aliceList: number;
    beforeAll(async () => {
      aliceList = (await ok({ entity: 'lists', action: 'insert', data: { name: 'alice groceries' } }, alice)).rows[0]
        .id;
      const bobList = (await ok({ entity: 'lists', action: 'insert', data: { name: 'bob tools' } }, bob)).rows[0].id;
      for (const [who, list_id, label, amount] of [
        [alice, aliceList, 'milk', 2],
        [alice, aliceList, 'eggs', 3],
        [bob, bobList, 'saw', 1],
        // Bob's entry on Alice's list: the foreign key holds, but the list is hidden from him.
        [bob, aliceList, 'sneaky', 7],
      ] as const)
        await ok({ entity: 'entries', action: 'insert', data: { list_id, label, amount } }, who);
    });

    test("expand and aggregate see only the caller's own rows; a hidden parent is null", async () => {
      const lists = await ok(
        {
          entity: 'lists',
          action: 'select',
          fields: ['name'],
          expand: { entries_via_list_id: { fields: ['label'], sort: [{ field: 'id' }], total: true } },
        },
        alice,
      );
      expect(lists.rows).toEqual([
        {
          name: 'alice groceries',
          expand: { entries_via_list_id: [{ label: 'milk' }, { label: 'eggs' }], entries_via_list_id_total: 2 },
        },
      ]);
      const mine = await ok(
        {
          entity: 'entries',
          action: 'select',
          fields: ['label'],
          sort: [{ field: 'id' }],
          expand: { list_id: { fields: ['name'] } },
        },
        bob,
      );
      expect(mine.rows).toEqual([
        { label: 'saw', expand: { list_id: { name: 'bob tools' } } },
        { label: 'sneaky', expand: { list_id: null } },
      ]);
      const sums = await ok(
        {
          entity: 'entries',
          action: 'aggregate',
          group_by: ['list_id.name'],
          aggregates: [
            { fn: 'sum', field: 'amount', as: 'amount' },
            { fn: 'count', as: 'n' },
          ],
          sort: [{ field: 'n' }],
        },
        bob,
      );
      // Bob's entry on Alice's list groups under a name he cannot see (null).
      expect(sums.rows).toEqual([
        { 'list_id.name': 'bob tools', amount: '1', n: 1 },
        { 'list_id.name': null, amount: '7', n: 1 },
      ]);
      const service = await ok({ entity: 'entries', action: 'aggregate', aggregates: [{ fn: 'count' }] });
      expect(service.rows).toEqual([{ count: 4 }]);
    });

    test('grants apply to every table and column reached, naming it', async () => {
      const column = await q(
        { entity: 'entries', action: 'select', expand: { list_id: { fields: ['secret'] } } },
        alice,
      );
      expectError(column, 403, 'forbidden');
      expect(column.body.error.message).toContain("column 'secret' of entity 'lists'");
      const table = await q({ entity: 'entries', action: 'select', expand: { stamps_via_entry_id: {} } }, alice);
      expectError(table, 403, 'forbidden');
      expect(table.body.error.message).toContain("'stamps'");
      const secretPath = await q(
        { entity: 'entries', action: 'aggregate', group_by: ['list_id.secret'], aggregates: [{ fn: 'count' }] },
        alice,
      );
      expectError(secretPath, 403, 'forbidden');
      // An unknown relation's 400 lists only the relations the role may follow: no other table's name.
      const unknown = await q({ entity: 'entries', action: 'select', expand: { nope: {} } }, alice);
      expectError(unknown, 400, 'validation_error');
      expect(unknown.body.error.details.fields['expand.nope']).toContain('its relations: list_id');
      expect(JSON.stringify(unknown.body)).not.toContain('stamps');
      const path = await q(
        { entity: 'entries', action: 'select', filters: [{ field: 'nope.x', op: 'eq', value: 1 }] },
        alice,
      );
      expectError(path, 400, 'validation_error');
      expect(JSON.stringify(path.body)).not.toContain('stamps');
      // Without fields, a relation reads the columns granted.
      const granted = await ok(
        { entity: 'entries', action: 'select', fields: ['label'], limit: 1, expand: { list_id: {} } },
        alice,
      );
      expect(Object.keys(granted.rows[0].expand.list_id).sort()).toEqual(['id', 'name', 'owner_id']);
    });
  });

  test.if(ON_SOURCE)('one statement per request: expand, paths, aggregates and totals', async () => {
    const db = s.platform.services.database;
    for (const [who, body] of [
      [
        key,
        {
          entity: 'posts',
          action: 'select',
          filters: [{ field: 'author_id.name', op: 'eq', value: 'Ann' }],
          total: true,
        },
      ],
      [
        key,
        {
          entity: 'posts',
          action: 'select',
          expand: { author_id: {}, comments_via_post_id: { total: true, expand: { author_id: {} } } },
        },
      ],
      [
        key,
        {
          entity: 'orders',
          action: 'aggregate',
          group_by: ['customer_id.country'],
          aggregates: [{ fn: 'count' }],
          total: true,
        },
      ],
      [alice, { entity: 'lists', action: 'select', expand: { entries_via_list_id: { total: true } } }],
      [
        alice,
        {
          entity: 'entries',
          action: 'aggregate',
          group_by: ['list_id.name'],
          aggregates: [{ fn: 'count' }],
          total: true,
        },
      ],
    ] as const) {
      const before = db.statementsSent;
      await ok(body, who);
      expect(db.statementsSent - before).toBe(1);
    }
  });
});
