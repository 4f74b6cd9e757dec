import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { startServer, type TestServer } from '../helpers/server';
import { deref } from '../openapi/support';

describe('Database API in the OpenAPI document', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer('embedded');
  });
  afterAll(() => s.stop());

  test('every route is described with request and response schemas, and the document is valid', async () => {
    const raw = (await s.req('GET', '/api/openapi.json')).body;
    const doc = { ...raw, paths: deref(raw, raw.paths) };
    const paths = [
      '/api/v1/db/query',
      '/api/v1/db/transaction/begin',
      '/api/v1/db/transaction/{id}/commit',
      '/api/v1/db/transaction/{id}/rollback',
    ];
    for (const p of paths) {
      const op = doc.paths[p]?.post;
      expect(op, p).toBeDefined();
      expect(op.tags).toEqual(['Database']);
      expect(op.summary.length).toBeGreaterThan(5);
      // A service key, a user's access token (with the site public key in api_key_required
      // mode), or nothing: anon (docs/database.md, Users' own data).
      expect(op.security).toEqual([{ ApiKey: [] }, { Bearer: [] }, {}, { ApiKey: [], Bearer: [] }]);
      for (const status of ['200', '400', '401', '403', '404', '409', '429', '503'])
        expect(op.responses[status], `${p} ${status}`).toBeDefined();
    }
    const body = doc.paths['/api/v1/db/query'].post.requestBody.content['application/json'].schema;
    expect(Object.keys(body.properties).sort()).toEqual([
      'action',
      'aggregates',
      'data',
      'entity',
      'expand',
      'fields',
      'filters',
      'group_by',
      'having',
      'limit',
      'offset',
      'sort',
      'total',
      'transaction_id',
    ]);
    expect(body.properties.action.enum).toEqual(['select', 'insert', 'update', 'delete', 'aggregate']);
    // Filter items, relations and aggregates: named schemas (the service checks them, naming positions).
    const schemas = raw.components.schemas;
    const item = body.properties.filters.items.allOf[0];
    expect(item.anyOf.map((x: { properties: object }) => Object.keys(x.properties).join())).toEqual([
      'field,op,value',
      'or',
      'and',
      'not',
    ]);
    expect(item.anyOf[0].properties.op.enum).toContain('not_in');
    expect(raw.paths['/api/v1/db/query'].post.requestBody.content['application/json'].schema.$ref).toBeDefined();
    for (const name of ['DbFilterItem', 'DbFilterOr', 'DbRelation', 'DbExpand', 'DbAggregate'])
      expect(schemas[name], name).toBeDefined();
    const relation = body.properties.expand.allOf[0].additionalProperties;
    expect(Object.keys(relation.properties).sort()).toEqual([
      'expand',
      'fields',
      'filters',
      'limit',
      'offset',
      'sort',
      'total',
    ]);
    expect(body.properties.aggregates.items.allOf[0].properties.fn.enum).toEqual([
      'count',
      'count_distinct',
      'sum',
      'avg',
      'min',
      'max',
    ]);
    expect(body.example.action).toBe('select');
    await SwaggerParser.validate(structuredClone(raw));
  });

  test('typed clients get literals: realtime events by their event name, error codes per route', async () => {
    const raw = (await s.req('GET', '/api/openapi.json')).body;
    const stream = raw.paths['/api/v1/realtime'].get.responses['200'].content['text/event-stream'].schema;
    expect(stream.discriminator).toEqual({
      propertyName: 'event',
      mapping: {
        change: '#/components/schemas/RealtimeChangeEvent',
        message: '#/components/schemas/RealtimeMessageEvent',
        reset: '#/components/schemas/RealtimeResetEvent',
        expired: '#/components/schemas/RealtimeExpiredEvent',
        revoked: '#/components/schemas/RealtimeRevokedEvent',
      },
    });
    for (const ref of Object.values(stream.discriminator.mapping) as string[])
      expect(raw.components.schemas[ref.split('/').pop()!]).toBeDefined();
    const forbidden = raw.paths['/api/v1/db/query'].post.responses['403'].content['application/json'].schema;
    expect(forbidden.allOf[0]).toEqual({ $ref: '#/components/schemas/ErrorA' });
    expect(forbidden.allOf[1].properties.error.properties.code.enum).toEqual(['forbidden', 'raw_sql_disabled']);
  });
});
