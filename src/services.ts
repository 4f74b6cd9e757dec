/**
 * Every area's service, built in one place on top of the platform's core (src/platform.ts),
 * each with the other services it names: the one place that knows them all. Route modules,
 * commands, workers and tests receive a `Basalt`: the core and these services.
 * docs/architecture.md (Layers) describes it.
 */
import { openPlatform, type OpenPlatformOptions, type Platform } from './platform';
import { createKeyService, type KeyService } from './modules/keys/service';
import { createMailService, type MailService } from './modules/mail/service';
import { createAuthService, type AuthService } from './modules/auth/service';
import { createDatabaseService, type DatabaseService } from './modules/database/service';
import { createExtensionRegistry, type ExtensionRegistry } from './extensions/registry';
import { createAdminService, type AdminService } from './modules/admin/service';
import { createRealtimeService, type RealtimeService } from './modules/realtime/service';
import { createJobsService, type JobsService } from './modules/jobs/service';
import { createRequestLogService, type RequestLogService } from './modules/logs/service';

export interface Services {
  keys: KeyService;
  mail: MailService;
  auth: AuthService;
  database: DatabaseService;
  admin: AdminService;
  realtime: RealtimeService;
  jobs: JobsService;
  logs: RequestLogService;
  extensions: ExtensionRegistry;
}

/** The platform's core with every area's service: what the route list, commands and workers receive. */
export interface Basalt extends Platform {
  readonly services: Services;
}

/** Creates every area's service, in dependency order. One line per area. */
export async function createServices(p: Platform): Promise<Services> {
  const keys = createKeyService(p);
  const mail = createMailService(p);
  const auth = await createAuthService(p, { mail });
  const database = await createDatabaseService(p, { keys, auth });
  const admin = createAdminService(p);
  const realtime = createRealtimeService(p, { database, keys, auth });
  const jobs = createJobsService(p);
  const logs = createRequestLogService(p);
  const extensions = createExtensionRegistry(p, { keys, auth, mail, realtime, jobs });
  return { keys, mail, auth, database, admin, realtime, jobs, logs, extensions };
}

/** Open the core (src/platform.ts) and build the services on it. */
export async function openBasalt(opts: OpenPlatformOptions = {}): Promise<Basalt> {
  const p = await openPlatform(opts);
  try {
    return Object.assign(p, { services: await createServices(p) });
  } catch (e) {
    // A service that refuses its configuration must not leave the database (and the data-dir lock) open.
    await p.shutdown().catch(() => {}); // the configuration error being thrown is the one to report
    throw e;
  }
}
