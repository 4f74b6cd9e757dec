import type { AnyElysia } from 'elysia';
import { toOpenAPISchema } from '@elysiajs/openapi';

type Doc = Record<string, any>;

const ONLY = [/^\/api\/v1\//, /^\/api\/module\//];

/**
 * The OpenAPI 3.1 document of every public route, built from the same TypeBox schemas
 * that validate requests. Routes of both listeners are merged; admin and system routes
 * are not part of the public contract and are left out.
 */
export function buildOpenApi(apps: AnyElysia[], version: string): Doc {
  const paths: Doc = {};
  const schemas: Doc = {};
  for (const app of apps) {
    const part = toOpenAPISchema(app, undefined, undefined, undefined, '3.1.0') as { paths?: Doc; components?: { schemas?: Doc } };
    for (const [path, item] of Object.entries(part.paths ?? {})) {
      if (!ONLY.some((r) => r.test(path))) continue;
      paths[path] = { ...(paths[path] ?? {}), ...(item as Doc) };
    }
    Object.assign(schemas, part.components?.schemas ?? {});
  }
  for (const item of Object.values(paths)) for (const op of Object.values(item as Doc)) normalizeOperation(op as Doc);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Basalt API',
      version,
      description: 'Public HTTP API of the Basalt platform: Public Auth, Database API, Mail API, Files (media-library) and extension routes.',
    },
    servers: [{ url: '/' }],
    tags: [
      { name: 'Public Auth', description: 'Site users: registration, login, tokens (format A envelopes).' },
      { name: 'Database', description: 'Parameterized CRUD over whitelisted tables, with transactions (format A).' },
      { name: 'Mail', description: 'Sending e-mail, sync or queued, idempotent (format B).' },
      { name: 'Files', description: 'media-library module (format C).' },
      { name: 'Runtime config', description: 'Public front-end parameters.' },
    ],
    paths,
    components: {
      schemas,
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        Bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
      },
    },
  };
}

/** Every operation must have at least one response for a strict validator. */
function normalizeOperation(op: Doc) {
  if (!op || typeof op !== 'object') return;
  if (!op.responses || Object.keys(op.responses).length === 0) op.responses = { 200: { description: 'Success' } };
  for (const r of Object.values(op.responses as Doc)) if (r && typeof r === 'object' && !('description' in r) && !('$ref' in r)) (r as Doc).description = 'Response';
}
