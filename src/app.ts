/**
 * The whole HTTP surface in one list: each area (its root path, listener, envelope, body
 * policy and OpenAPI tag, declared in src/http/areas.ts) with its routes (README.md, What
 * it serves). Everything else reads these facts from here: the listener's body checks and
 * headers (src/http/server.ts), the envelopes (src/http/envelope.ts), the metrics, the
 * extension loader (which areas an extension may claim) and the OpenAPI document. Building
 * the apps has no side effects: `serve` loads the extensions and starts the workers
 * (src/serve.ts).
 */
import { Elysia, type AnyElysia } from 'elysia';
import type { Basalt } from './services';
import type { ExtensionGroup } from './extensions/context';
import { AREA, Areas, rootOf, type AreaFacts, type Listener } from './http/areas';
import { foundation } from './http/foundation';
import { createHandler, type Handler } from './http/server';
import { metricsFor } from './http/metrics';
import { systemRoutes } from './modules/system/routes';
import { openapiDocument, openapiRoutes } from './modules/openapi/routes';
import { runtimeConfigRoutes } from './modules/runtime-config/routes';
import { authRoutes } from './modules/auth/routes';
import { mailRoutes } from './modules/mail/routes';
import { databaseRoutes } from './modules/database/routes';
import { realtimeRoutes } from './modules/realtime/routes';
import { adminRoutes } from './modules/admin/routes';
import { panelRoutes } from './modules/panel/routes';
import { clientRoutes } from './modules/client/routes';

export type { Listener } from './http/areas';

export interface Area extends AreaFacts {
  /**
   * The area's routes, under `prefix`. Absent where they come from elsewhere: an
   * extension's `ctx.claim` (files), the extensions' own routes (module), the OpenAPI
   * document, which is built last from every other route (openapi, docs).
   */
  routes?: (p: Basalt, area: AreaFacts) => AnyElysia | Promise<AnyElysia>;
}

/**
 * The route list: each area of src/http/areas.ts (`AREA`) with its routes. Its order is the
 * order routes mount in, and the order of the OpenAPI document's tags.
 */
export const routeList: readonly Area[] = [
  { ...AREA.system, routes: systemRoutes },
  { ...AREA.auth, routes: authRoutes },
  { ...AREA.db, routes: databaseRoutes },
  { ...AREA.realtime, routes: realtimeRoutes },
  { ...AREA.mail, routes: mailRoutes },
  AREA.files,
  { ...AREA.runtime_config, routes: runtimeConfigRoutes },
  { ...AREA.client, routes: clientRoutes },
  AREA.module,
  { ...AREA.admin, routes: (p, area) => adminRoutes(p, area, { authRoot: rootOf(areas.byName('auth')) }) },
  // The panel also answers `/` on the main listener with a redirect to `/_/`.
  { ...AREA.panel, routes: panelRoutes },
  AREA.openapi,
  AREA.docs,
];

export const areas = new Areas(routeList);

/** A group of routes mounted beside the list: an extension's (mounted in the area of its prefix) or a test's. */
export interface RouteModule {
  name: string;
  /** The listener; an extension's group takes its area's. */
  listener: Listener;
  routes: (p: Basalt) => AnyElysia | Promise<AnyElysia>;
}

/** Extra route modules for tests; mounted after the list. */
export type ExtraModules = RouteModule[];

export interface BuiltApp {
  main: AnyElysia;
  /** Present only when web.public_api_separate is true. */
  public?: AnyElysia;
  mainHandler: Handler;
  publicHandler?: Handler;
}

export interface AppParts {
  /** The loaded extensions' route groups (`p.services.extensions.load(areas)`). */
  extensions?: ExtensionGroup[];
  extra?: ExtraModules;
}

export async function createApp(p: Basalt, parts: AppParts = {}): Promise<BuiltApp> {
  const separate = p.settings.get('web.public_api_separate');
  // The router takes the path from the first `/` after `http://` (not Elysia's default of
  // index 11, which assumes a host of 4+ characters): the listener only hands on
  // `http://<valid host>/…` (src/http/envelope.ts `hostProblem`), so this is the path.
  const routing = { standardHostname: false };
  const main: AnyElysia = new Elysia({ name: 'basalt.main', handler: routing }).use(foundation(p.log));
  const pub: AnyElysia | undefined = separate
    ? new Elysia({ name: 'basalt.public', handler: routing }).use(foundation(p.log))
    : undefined;
  const on = (listener: Listener | 'both') => (listener === 'public' && pub ? pub : main);

  const extensions = parts.extensions ?? [];
  for (const area of routeList) {
    if (area.routes) on(area.listener).use(await area.routes(p, area));
    for (const g of extensions) if (areas.of(g.prefix) === area) on(area.listener).use(g.app);
  }
  for (const m of parts.extra ?? []) on(m.listener).use(await m.routes(p));
  // The OpenAPI document is built once, now, before any request (src/modules/openapi/routes.ts),
  // from every route above, and served on both listeners; the reference page on the public one.
  const document = openapiDocument(pub ? [pub, main] : [main], p.version, areas);
  const at = { spec: rootOf(areas.byName('openapi')), docs: rootOf(areas.byName('docs')) };
  main.use(openapiRoutes(document, !pub, at));
  pub?.use(openapiRoutes(document, true, at));

  // Every request goes through the app: each route's checks live in the route, once.
  const handler = (app: AnyElysia) =>
    createHandler({
      settings: p.settings,
      log: p.log,
      areas,
      handle: (req) => app.handle(req),
      metrics: metricsFor(p),
      requestLog: p.services.logs,
    });
  return { main, public: pub, mainHandler: handler(main), publicHandler: pub && handler(pub) };
}
