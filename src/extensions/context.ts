/**
 * `ctx`: everything an extension gets in `setup(ctx)`. It is the whole extension
 * API; an extension needs no other import from the platform (docs/extensions.md).
 */
import type { AnyElysia } from 'elysia';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Platform } from '../platform';
import type { SettingKey, SettingValue } from '../config/schema';
import type { Logger } from '../log';
import type { Queryable } from '../db/engine';
import { quoteIdent } from '../db/engine';
import { AppError, Errors } from '../http/errors';
import { requestInfo } from '../http/request-info';
import { reply } from '../http/foundation';
import { errorResponses, type SuccessBodyOf } from '../http/envelope-schemas';
import { prefixesOf, rootOf, type AREA, type Areas } from '../http/areas';
import { guardInputs, type GuardServices } from '../guards';
import type { MailService } from '../modules/mail/service';
import type { ChannelRule, RealtimeService } from '../modules/realtime/service';
import type { ExtensionSettings } from './settings-store';
import {
  extensionGuards,
  guardedGroup,
  moduleGroup,
  type ExtensionApp,
  type ExtensionGuards,
  type ModuleApp,
} from './guards';
import { extensionMail, type ExtensionMail } from './mail';
import { extensionJobs, type ExtensionCron, type ExtensionJobs, type ExtensionOn } from './jobs';
import type { JobsService } from '../modules/jobs/service';
import { envelopeB, envelopeC } from './schemas';
import { isUuid } from '../util/uuid';

/** The core prefixes an extension may own: the areas of the route list marked `claimable` (src/app.ts; docs/extensions.md). */
export function claimablePrefixes(areas: Areas): string[] {
  return areas.list.filter((a) => a.claimable).flatMap(prefixesOf);
}

/** Database access for an extension: the platform database, its own schema and the data schema. */
export interface ExtensionDb extends Queryable {
  /** The extension's schema, e.g. `ext_contact_form` (where its migrations run). */
  readonly schema: string;
  /** The application tables' schema (setting database.data_schema, default `public`). */
  readonly dataSchema: string;
  /** `"ext_contact_form"."submissions"`: a quoted, schema-qualified name of the extension's table. */
  table(name: string): string;
  /** Run `fn` in a transaction; commit on success, roll back on throw. */
  transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R>;
}

export interface ExtensionRealtime {
  publish(channel: string, data: unknown, opts?: { users?: string[]; tx?: Queryable }): Promise<void>;
  /**
   * Decide who may follow this extension's channels: `rule(channel, who)` runs each time a
   * stream asks for one of them (`channel` without the `<extension>:` prefix; `who` is
   * `{kind:'user', userId}`, `{kind:'key', keyId}` or `{kind:'anon'}`); anything but `true`
   * refuses the stream (403, 401 for anon). Without a rule anyone may follow any of them.
   *
   * @example
   * ctx.realtime.authorize((channel, who) => channel === 'news' || who.kind === 'key');
   */
  authorize(rule: ChannelRule): void;
}

const CHANNEL = /^[A-Za-z0-9_.-]{1,100}$/;

/**
 * A success body of an extension route, in the envelope of either area its routes live in
 * (src/http/areas.ts: the module area's, or the claimed files area's), typed as both.
 */
type ExtensionSuccess<T extends object> = SuccessBodyOf<(typeof AREA.module)['envelope'], T> &
  SuccessBodyOf<(typeof AREA.files)['envelope'], T>;

export interface ExtensionContext extends ExtensionGuards {
  readonly name: string;
  readonly version: string;
  /** The platform's version. */
  readonly platformVersion: string;
  /**
   * Routes mounted at `/api/module/<name>` on the public listener, envelope B, behind
   * the access-mode gate (web.public_api_access_mode). Give each route `body`/`response`
   * schemas and `detail` so the OpenAPI document describes it. Guard a route with
   * `{ apiKey: permission }` or `{ user: true }`: its handler receives `apiKey`/`user`.
   */
  readonly routes: ModuleApp;
  /**
   * Own a documented core prefix (only `/api/v1/files`, listener main, envelope C).
   * Returns an Elysia group mounted at that prefix. Two extensions claiming the same
   * prefix are both refused.
   */
  claim(prefix: '/api/v1/files' | (string & {})): ExtensionApp;
  readonly db: ExtensionDb;
  readonly mail: ExtensionMail;
  /**
   * Publish on this extension's realtime channels (docs/realtime.md). Clients follow
   * `GET /api/v1/realtime?channels=<extension>:<channel>`; `users` limits a message to
   * those users' streams. Pass `tx` to publish with a transaction (sent only if it commits).
   *
   * @example
   * await ctx.realtime.publish('submissions', { id }, { tx });
   */
  readonly realtime: ExtensionRealtime;
  /**
   * Durable jobs (docs/extensions.md, "Jobs"): `define` a handler in setup, `enqueue` from
   * anywhere (with `tx` inside a transaction).
   *
   * @example
   * ctx.jobs.define('resize', async (job) => resize(job.payload, job.signal), { attempts: 5, timeoutMs: 60_000 });
   * const id = await ctx.jobs.enqueue('resize', { fileId }, { idempotencyKey: fileId });
   */
  readonly jobs: ExtensionJobs;
  /**
   * Run `handler` on a cron schedule (five fields, UTC unless `timezone`), once per slot across
   * all instances; each run is a job (docs/extensions.md, "Cron").
   *
   * @example
   * ctx.cron('nightly-digest', '0 3 * * *', async (run) => digest(run.slot), { timezone: 'Europe/Paris' });
   */
  readonly cron: ExtensionCron;
  /**
   * A durable hook (docs/extensions.md, "Hooks"): a table's committed changes, or a platform
   * event (`auth.user_created`, `auth.user_verified`, `auth.user_deleted`, `auth.signed_in`,
   * `mail.delivered`, `mail.failed`), delivered at least once, in commit order.
   *
   * @example
   * ctx.on('orders', ['insert', 'update'], async (event) => notify(event.row), { name: 'notify-shipping' });
   * ctx.on('auth.user_created', async (event) => welcome(event.user));
   */
  readonly on: ExtensionOn;
  /** Settings declared in `defineExtension({ settings })`. */
  readonly settings: ExtensionSettings;
  /** A live platform setting (read-only), e.g. `files.max_bytes`. */
  platformSetting<K extends SettingKey>(key: K): SettingValue<K>;
  /** A platform setting named at run time (its type given by hand); a name Basalt does not know throws. */
  platformSetting<T = unknown>(key: string): T;
  /** Structured logger; every line carries `extension: <name>`. */
  readonly log: Logger;
  /** A directory of the extension's own under the data dir (created on first use). */
  dataDir(): string;
  /**
   * Success body in the envelope of the request's area (B under /api/module, C under
   * /api/v1/files). Typed as both, so a route's `response` of either envelope accepts it.
   */
  reply<T extends object>(request: Request, data: T): ExtensionSuccess<T>;
  /** The client's IP (honours web.trusted_proxies). */
  clientIp(request: Request): string;
  /** The one error type: throw `new ctx.AppError(status, code, message)` or `ctx.errors.*`. */
  readonly AppError: typeof AppError;
  readonly errors: typeof Errors;
  /** Response schemas of the envelopes, for route `response` declarations (src/http/envelope-schemas.ts). */
  readonly schemas: {
    envelope: typeof envelopeB;
    envelopeC: typeof envelopeC;
    /** The error statuses a route answers, each with the envelope's error body: `errors('C', 401, 404)`. */
    errors: typeof errorResponses;
  };
  /** Run on graceful shutdown (close clients, flush). */
  onShutdown(fn: () => Promise<void> | void): void;
}

/** What the loader keeps of a context after setup: the route groups to mount. */
export interface BuiltContext {
  ctx: ExtensionContext;
  /** Mounted by src/app.ts in the area of their prefix (its listener, its envelope). */
  groups: { prefix: string; app: AnyElysia }[];
  /** Run the extension's `onShutdown` hooks now (once): the loader refused it after its setup ran. */
  stop(): Promise<void>;
}

/** The schema name of an extension: `ext_` + name with dashes as underscores. */
export function extensionSchema(name: string): string {
  return 'ext_' + name.replace(/-/g, '_');
}

/** The services an extension's context uses: the guards', mail, realtime and jobs. */
export interface ExtensionServices extends GuardServices {
  mail: MailService;
  jobs: JobsService;
  realtime: Pick<RealtimeService, 'publish' | 'authorizeChannels'>;
}

/** A route group an extension built: mounted in the area of its prefix (src/app.ts). */
export interface ExtensionGroup {
  name: string;
  prefix: string;
  app: AnyElysia;
}

export function createContext(
  p: Platform,
  services: ExtensionServices,
  def: { name: string; version: string },
  settings: ExtensionSettings,
  log: Logger,
  areas: Areas,
): BuiltContext {
  const { name } = def;
  const schema = extensionSchema(name);
  const modulePrefix = `${rootOf(areas.byName('module'))}/${name}`;
  const claimable = claimablePrefixes(areas);
  // Module routes are a public prefix: the access mode decides whether a key is needed.
  const guards = guardInputs(p, services);
  const moduleApp = moduleGroup(modulePrefix, guards);
  const groups: BuiltContext['groups'] = [{ prefix: modulePrefix, app: moduleApp }];

  const db: ExtensionDb = {
    schema,
    dataSchema: p.settings.get('database.data_schema'),
    table: (t) => `${quoteIdent(schema)}.${quoteIdent(t)}`,
    query: (sql, params) => p.db.query(sql, params),
    exec: (sql) => p.db.exec(sql),
    transaction: (fn) => p.db.transaction(fn),
  };

  // The extension's shutdown hooks are kept here rather than handed to the platform one by
  // one, so that an extension refused after its setup (a prefix or route clash, a setup that
  // threw or timed out) has its timers and clients stopped at once, not at process exit.
  // Its jobs, cron entries and hooks go with it (run last: the list runs in reverse).
  const hooks: (() => Promise<void> | void)[] = [() => services.jobs.forget(name)];
  let stopped = false;
  const runHook = async (fn: () => Promise<void> | void) => {
    try {
      await fn();
    } catch (e) {
      log.error('shutdown step failed', { cause: e });
    }
  };
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const fn of hooks.splice(0).reverse()) await runHook(fn);
  };
  p.onShutdown(stop);

  const scheduled = extensionJobs(services.jobs, name, db.dataSchema);
  const ctx: ExtensionContext = {
    name,
    version: def.version,
    platformVersion: p.version,
    routes: moduleApp,
    claim(prefix) {
      if (!claimable.includes(prefix))
        throw new Error(
          `claim('${prefix}'): only these core prefixes can be claimed: ${claimable.join(', ')}; other routes go on ctx.routes (${modulePrefix})`,
        );
      if (groups.some((g) => g.prefix === prefix))
        throw new Error(`claim('${prefix}'): already claimed by this extension`);
      const app = guardedGroup(prefix, guards);
      groups.push({ prefix, app });
      return app;
    },
    db,
    mail: extensionMail(services.mail),
    realtime: {
      publish: async (channel, data, opts = {}) => {
        if (!CHANNEL.test(channel))
          throw new Error(`realtime.publish('${channel}'): a channel name is 1-100 of A-Z a-z 0-9 _ . -`);
        if (opts.users?.some((u) => !isUuid(u))) throw new Error('realtime.publish: users are user ids (uuid)');
        await services.realtime.publish(`${name}:${channel}`, data, opts);
      },
      authorize: (rule) => services.realtime.authorizeChannels(name, rule),
    },
    jobs: scheduled.jobs,
    cron: scheduled.cron,
    on: scheduled.on,
    settings,
    platformSetting: ((key: string) => p.settings.getUntyped(key)) as ExtensionContext['platformSetting'],
    log,
    dataDir() {
      const dir = join(p.dataDir, 'extensions', name);
      mkdirSync(dir, { recursive: true });
      return dir;
    },
    reply: (request, data) => reply(request, data) as ExtensionSuccess<typeof data>,
    clientIp: (request) => requestInfo(request).ip,
    AppError,
    errors: Errors,
    schemas: { envelope: envelopeB, envelopeC, errors: errorResponses },
    // A hook registered after stop (a setup still running past its timeout) runs at once.
    onShutdown: (fn) => void (stopped ? runHook(fn) : hooks.push(fn)),
    ...extensionGuards(guards),
  };
  return { ctx, groups, stop };
}
