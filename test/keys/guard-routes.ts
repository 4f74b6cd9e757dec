/**
 * Test-only routes that expose the API key guards over HTTP, so the guards are
 * exercised through real listeners exactly as area routes use them.
 */
import { Elysia } from 'elysia';
import type { RouteModule } from '../../src/app';
import { publicAccess, requireApiKey, type Permission } from '../../src/http/api-key-guard';

export const guardRoutes: RouteModule = {
  name: 'keys-test',
  listener: 'public',
  routes: (p) =>
    new Elysia({ name: 'keys-test' })
      .get('/api/v1/keys-test/require/:permission', async ({ request, params }) => {
        const principal = await requireApiKey(p, request, params.permission === 'any' ? undefined : (params.permission.replace('-', ':') as Permission));
        return { success: true, data: { id: principal.id, type: principal.type } };
      })
      .get('/api/v1/keys-test/public', async ({ request }) => {
        const principal = await publicAccess(p, request);
        return { success: true, data: { id: principal?.id ?? null } };
      }),
};
