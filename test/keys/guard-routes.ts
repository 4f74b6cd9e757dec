/**
 * Test-only routes that expose the API key guards over HTTP, so the guards are
 * exercised through real listeners exactly as area routes use them.
 */
import { Elysia } from 'elysia';
import type { RouteModule } from '../../src/app';
import type { ApiKeyPrincipal } from '../../src/http/api-key-guard';
import { platformGuards } from '../../src/guards';

const answer = ({ apiKey }: { apiKey: ApiKeyPrincipal }) => ({
  success: true,
  data: { id: apiKey.id, type: apiKey.type },
});

export const guardRoutes: RouteModule = {
  name: 'keys-test',
  listener: 'public',
  routes: (p) =>
    new Elysia({ name: 'keys-test', prefix: '/api/v1/keys-test' })
      .use(platformGuards(p, p.services))
      .get('/require/any', answer, { apiKey: true })
      .get('/require/mail-send', answer, { apiKey: 'mail:send' })
      .get('/require/db-query', answer, { apiKey: 'db:query' })
      .get('/require/files-upload', answer, { apiKey: 'files:upload' })
      .get('/require/files-download', answer, { apiKey: 'files:download' })
      .get('/public', ({ apiKey }) => ({ success: true, data: { id: apiKey?.id ?? null } }), { publicAccess: true }),
};
