/**
 * Extension routes in the OpenAPI document (valid under swagger-parser) and on the
 * right listener when the public API is served separately.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { ENGINES } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { REPO_EXTENSIONS } from './support';

describe.each(ENGINES)('extensions in OpenAPI and listeners on %s', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer(engine, {
      env: { BASALT_EXTENSIONS_DIR: REPO_EXTENSIONS, BASALT_WEB_PUBLIC_API_SEPARATE: 'true' },
    });
  });
  afterAll(() => s.stop());

  test('the document lists the Files API and the contact form, and is valid', async () => {
    const r = await s.req('GET', '/api/openapi.json');
    expect(r.status).toBe(200);
    const doc = r.body;
    const ops = (path: string) => Object.keys(doc.paths[path] ?? {}).sort();
    expect(ops('/api/v1/files')).toEqual(['get', 'post']);
    expect(ops('/api/v1/files/{id}')).toEqual(['delete', 'get']);
    expect(ops('/api/v1/files/{id}/content')).toEqual(['get', 'head']);
    expect(ops('/api/module/contact-form/submit')).toEqual(['post']);
    expect(doc.paths['/api/v1/files'].post.requestBody.content['multipart/form-data'].schema.properties.file).toEqual({
      type: 'string',
      format: 'binary',
    });
    expect(Object.keys(doc.paths['/api/v1/files/{id}/content'].get.responses)).toEqual([
      '200',
      '206',
      '304',
      '401',
      '403',
      '404',
      '416',
      '500',
      '503',
    ]);
    expect(Object.keys(doc.paths['/api/v1/files/{id}/content'])).toEqual(['get', 'head']);
    expect(Object.keys(doc.paths['/api/module/contact-form/submit'].post.requestBody.content)).toContain(
      'application/x-www-form-urlencoded',
    );
    await SwaggerParser.validate(structuredClone(doc));
  });

  test.each([
    ['files on the main listener', 'main', '/api/v1/files', 401],
    ['files are not on the public listener', 'public', '/api/v1/files', 404],
    ['module routes on the public listener', 'public', '/api/module/contact-form/submit', 400],
    ['module routes are not on the main listener', 'main', '/api/module/contact-form/submit', 404],
  ] as const)('%s', async (_name, listener, path, status) => {
    const base = listener === 'main' ? s.url : s.publicUrl;
    const method = path.includes('submit') ? 'POST' : 'GET';
    const r = await s.req(method, path, { base, body: method === 'POST' ? {} : undefined });
    expect(r.status).toBe(status);
  });
});
