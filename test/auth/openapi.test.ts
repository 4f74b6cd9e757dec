/**
 * Every Public Auth route is in /api/openapi.json with its request and response
 * schemas, and the document passes a standard validator.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import type { TestServer } from '../helpers/server';
import { startAuthServer } from './support';
import { deref } from '../openapi/support';

const ROUTES: [string, string, string, boolean][] = [
  ['post', '/api/v1/auth/register', '201', true],
  ['post', '/api/v1/auth/login', '200', true],
  ['post', '/api/v1/auth/refresh', '200', true],
  ['post', '/api/v1/auth/logout', '200', true],
  ['get', '/api/v1/auth/me', '200', false],
  ['post', '/api/v1/auth/password/forgot', '200', true],
  ['post', '/api/v1/auth/password/reset', '200', true],
  ['post', '/api/v1/auth/password/change', '200', true],
  ['post', '/api/v1/auth/verify-email', '200', true],
  ['post', '/api/v1/auth/verify-email/resend', '200', true],
  ['post', '/api/v1/auth/otp/request', '202', true],
  ['post', '/api/v1/auth/otp/verify', '200', true],
  ['post', '/api/v1/auth/oauth/exchange', '200', true],
  ['post', '/api/v1/auth/oauth/{name}/link', '200', true],
  ['get', '/api/v1/auth/identities', '200', false],
  ['delete', '/api/v1/auth/identities/{id}', '200', false],
  ['post', '/api/v1/auth/mfa/totp/enroll', '200', false],
  ['post', '/api/v1/auth/mfa/totp/confirm', '200', true],
  ['delete', '/api/v1/auth/mfa/totp', '200', true],
  ['post', '/api/v1/auth/mfa/verify', '200', true],
];

describe('Public Auth in the OpenAPI document', () => {
  let s: TestServer;
  let doc: any;
  beforeAll(async () => {
    s = await startAuthServer('embedded');
    const raw = (await s.req('GET', '/api/openapi.json')).body;
    await SwaggerParser.validate(structuredClone(raw));
    // Schemas are named components ($ref); read them resolved.
    doc = { ...raw, paths: deref(raw, raw.paths) };
  });
  afterAll(() => s.stop());

  test('the document is valid OpenAPI', () => {
    expect(doc.openapi).toBe('3.1.0');
  });

  test.each(ROUTES)('%s %s: tag, summary, body and response schemas', (method, path, okStatus, hasBody) => {
    const op = doc.paths[path]?.[method];
    expect(op).toBeDefined();
    expect(op.tags).toEqual(['Public Auth']);
    expect(op.summary).toBeString();
    expect(op.description.length).toBeGreaterThan(20);
    const ok = op.responses[okStatus].content['application/json'].schema;
    expect(ok.properties.success).toBeDefined();
    expect(ok.properties.data).toBeDefined();
    const errorStatuses = Object.keys(op.responses).filter((k) => k >= '400');
    expect(errorStatuses.length).toBeGreaterThan(0);
    // Format A, its code narrowed to the codes this route answers (a union for generated clients).
    for (const st of errorStatuses) {
      const [envelope, narrowed] = op.responses[st].content['application/json'].schema.allOf;
      expect(envelope.properties.error).toBeDefined();
      expect(narrowed.properties.error.properties.code.enum.length).toBeGreaterThan(0);
    }
    if (hasBody) expect(op.requestBody.content['application/json'].schema.type).toBe('object');
  });

  test('login documents an example body and the Bearer routes their security', () => {
    expect(doc.paths['/api/v1/auth/login'].post.requestBody.content['application/json'].schema.example).toEqual({
      email: 'ada@example.com',
      password: expect.any(String),
    });
    // The access-mode key comes on top of the token in api_key_required mode.
    expect(doc.paths['/api/v1/auth/me'].get.security).toEqual([{ Bearer: [] }, { Bearer: [], ApiKey: [] }]);
  });

  test('the provider redirects are documented, with their error codes; login documents the MFA step', () => {
    for (const step of ['start', 'callback']) {
      const op = doc.paths[`/api/v1/auth/oauth/{name}/${step}`].get;
      expect(op.summary).toContain('browser navigation');
      expect(op.responses['400'].description).toContain(step === 'start' ? '`invalid_redirect`' : '`invalid_state`');
    }
    const login = doc.paths['/api/v1/auth/login'].post.responses['200'].content['application/json'].schema;
    expect(JSON.stringify(login)).toContain('mfa_token');
  });
});
