/**
 * Builds the listeners' apps. The list below is the whole HTTP surface: reading it
 * tells which area is mounted on which listener (README.md, What it serves).
 */
import { Elysia, type AnyElysia } from 'elysia';
import type { Platform } from './platform';
import { foundation } from './http/foundation';
import { createHandler, type Handler } from './http/server';
import { metricsFor } from './http/metrics';
import { systemRoutes } from './modules/system/routes';
import { openapiDocument, openapiRoutes } from './modules/openapi/routes';
import { runtimeConfigRoutes } from './modules/runtime-config/routes';
import { authRoutes } from './modules/auth/routes';
import { mailRoutes } from './modules/mail/routes';
import { databaseRoutes } from './modules/database/routes';
import { adminRoutes } from './modules/admin/routes';
import { panelRoutes } from './modules/panel/routes';

export type Listener = 'main' | 'public';

export interface RouteModule {
  name: string;
  listener: Listener;
  routes: (p: Platform) => AnyElysia | Promise<AnyElysia>;
}

/** Every area's routes, and the listener each belongs to when the split is on. */
export const routeModules: RouteModule[] = [
  { name: 'system', listener: 'main', routes: systemRoutes },
  { name: 'runtime-config', listener: 'public', routes: runtimeConfigRoutes },
  { name: 'auth', listener: 'public', routes: authRoutes },
  { name: 'database', listener: 'public', routes: databaseRoutes },
  { name: 'mail', listener: 'main', routes: mailRoutes },
  { name: 'admin', listener: 'main', routes: adminRoutes },
  { name: 'panel', listener: 'main', routes: panelRoutes },
];

export interface BuiltApp {
  main: AnyElysia;
  /** Present only when web.public_api_separate is true. */
  public?: AnyElysia;
  mainHandler: Handler;
  publicHandler?: Handler;
}

/** Extra route modules contributed at start (extensions); mounted after the core list. */
export type ExtraModules = RouteModule[];

export async function createApp(p: Platform, extra: ExtraModules = []): Promise<BuiltApp> {
  const separate = p.settings.get<boolean>('web.public_api_separate');
  // The router takes the path from the first `/` after `http://` (not Elysia's default of
  // index 11, which assumes a host of 4+ characters): the listener only hands on
  // `http://<valid host>/…` (src/http/envelope.ts `hostProblem`), so this is the path.
  const routing = { standardHostname: false };
  const main: AnyElysia = new Elysia({ name: 'basalt.main', handler: routing }).use(foundation(p.log));
  const pub: AnyElysia | undefined = separate ? new Elysia({ name: 'basalt.public', handler: routing }).use(foundation(p.log)) : undefined;
  const apps = () => (pub ? [pub, main] : [main]);

  // Extensions are scanned and set up once per platform; their groups mount after the core list.
  const extensions = await p.services.extensions.load();
  for (const m of [...routeModules, ...extensions, ...extra]) {
    const target = m.listener === 'public' && pub ? pub : main;
    target.use(await m.routes(p));
  }
  // The OpenAPI document is built once, now, before any request (src/modules/openapi/routes.ts),
  // and served on both listeners; the reference page on the public one.
  const document = openapiDocument(apps(), p.version);
  main.use(openapiRoutes(document, !pub));
  pub?.use(openapiRoutes(document, true));

  const handler = (app: AnyElysia) => createHandler({ settings: p.settings, log: p.log, handle: (req) => app.handle(req), metrics: metricsFor(p) });
  return { main, public: pub, mainHandler: handler(main), publicHandler: pub && handler(pub) };
}
