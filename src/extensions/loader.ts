/**
 * Scans `extensions.dir` at start: every `<dir>/<folder>/index.ts` (or `index.js`)
 * is imported by absolute path, checked, migrated and set up. One extension that
 * throws never stops the platform: it is recorded as failed with its error and
 * logged, and the others load. Two extensions declaring the same name, or mounting
 * the same route, are both refused, each error naming the other.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Platform } from '../platform';
import { rootOf, type Areas } from '../http/areas';
import { quoteIdent } from '../db/engine';
import { migrateDir } from '../db/migrate';
import { withTimeout } from '../util/timeout';
import { definitionProblem, type ExtensionDefinition } from './define';
import {
  createContext,
  extensionSchema,
  type BuiltContext,
  type ExtensionGroup,
  type ExtensionServices,
} from './context';
import { provideModules } from './provided-modules';
import type { ExtensionSettings, ExtensionSettingsStore, ExtensionSettingView } from './settings-store';

const ENTRY_FILES = ['index.ts', 'index.js', 'index.mjs'];

/** What the loader records of each extension (`services.extensions.list()`, ./registry.ts). */
export interface ExtensionRecord {
  /** The declared name, or the folder name when the extension failed before declaring one. */
  name: string;
  /** Absolute path of the extension's folder. */
  folder: string;
  version?: string;
  description?: string;
  status: 'loaded' | 'failed';
  /** Why it failed: import error, setup error, name or route collision (naming both sides). */
  error?: string;
  /** `METHOD /path` of every route it mounted. */
  routes: string[];
  /** Migration files applied by this start. */
  migrations: string[];
  settings: ExtensionSettingView[];
}

/** Internal form kept by the loader: the settings object stays live for `list()`. */
export interface LoadedRecord extends Omit<ExtensionRecord, 'settings'> {
  settingsApi?: ExtensionSettings;
}

interface Candidate {
  record: LoadedRecord;
  def?: ExtensionDefinition;
  built?: BuiltContext;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Folders that hold an entry file, in name order. */
function scan(dir: string): { folder: string; entry: string }[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && !d.name.startsWith('.') && d.name !== 'node_modules')
    .map((d) => d.name)
    .sort()
    .flatMap((name) => {
      const entry = ENTRY_FILES.map((f) => join(dir, name, f)).find((f) => existsSync(f));
      return entry ? [{ folder: join(dir, name), entry }] : [];
    });
}

function fail(c: Candidate, error: string): void {
  c.record.status = 'failed';
  c.record.error = error;
  c.record.settingsApi = undefined;
}

async function importOne(folder: string, entry: string): Promise<Candidate> {
  const record: LoadedRecord = {
    name: folder.split(/[\\/]/).pop()!,
    folder,
    status: 'failed',
    routes: [],
    migrations: [],
  };
  const c: Candidate = { record };
  let mod: { default?: unknown };
  try {
    mod = await import(entry);
  } catch (e) {
    fail(c, `import of ${entry} failed: ${message(e)}`);
    return c;
  }
  const problem = definitionProblem(mod.default);
  if (problem) {
    fail(c, `${entry}: ${problem}`);
    return c;
  }
  c.def = mod.default as ExtensionDefinition;
  Object.assign(record, { name: c.def.name, version: c.def.version, description: c.def.description });
  return c;
}

/** Migrations, context and setup of one extension whose name is unique. */
async function setUp(
  p: Platform,
  services: ExtensionServices,
  c: Candidate,
  store: ExtensionSettingsStore,
  areas: Areas,
): Promise<void> {
  const def = c.def!;
  const log = p.log.child({ extension: def.name });
  try {
    const settings = store.forExtension(def.name, def.settings);
    const schema = extensionSchema(def.name);
    await p.db.exec(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
    c.record.migrations = await migrateDir(p.db, join(c.record.folder, 'migrations'), {
      table: 'basalt.extension_migrations',
      schema,
      scope: { column: 'extension', value: def.name },
    });
    c.built = createContext(p, services, def, settings, log, areas);
    // A setup that has not finished in time is marked failed, so start-up cannot hang on one extension.
    const timeout = p.settings.get('extensions.setup_timeout_ms');
    await withTimeout(
      Promise.resolve(def.setup(c.built.ctx)),
      timeout,
      `setup of extension ${def.name} did not finish within ${timeout / 1000} s (extensions.setup_timeout_ms)`,
    );
    c.record.settingsApi = settings;
    c.record.routes = c.built.groups.flatMap((g) => g.app.routes.map((r) => `${r.method} ${r.path}`));
    c.record.status = 'loaded';
  } catch (e) {
    fail(c, `setup failed: ${message(e)}`);
    await c.built?.stop();
  }
}

/** Refuse every extension involved in a clash of `key` (a name, a route or a claimed prefix). */
function refuseClashes(candidates: Candidate[], keysOf: (c: Candidate) => string[], what: string): void {
  const owners = new Map<string, Candidate[]>();
  for (const c of candidates) for (const k of new Set(keysOf(c))) owners.set(k, [...(owners.get(k) ?? []), c]);
  for (const [key, list] of owners) {
    if (list.length < 2) continue;
    const names = list.map((c) => `'${c.record.name}' (${c.record.folder})`).join(' and ');
    for (const c of list) fail(c, `${what} ${key} is claimed by ${names}; remove or rename one of them`);
  }
}

export async function loadExtensions(
  p: Platform,
  services: ExtensionServices,
  dir: string,
  store: ExtensionSettingsStore,
  areas: Areas,
): Promise<{ records: LoadedRecord[]; groups: ExtensionGroup[] }> {
  // Info, not debug: a missing or empty directory is the usual reason the Files API is 404,
  // and the operator needs the absolute path that was actually looked at.
  if (!existsSync(dir)) {
    p.log.info('extensions directory does not exist; no extensions loaded', { dir });
    return { records: [], groups: [] };
  }
  const found = scan(dir);
  if (!found.length) {
    p.log.info('no extensions found', { dir });
    return { records: [], groups: [] };
  }
  provideModules();
  const candidates: Candidate[] = [];
  for (const f of found) candidates.push(await importOne(f.folder, f.entry));

  refuseClashes(
    candidates.filter((c) => c.def),
    (c) => [c.def!.name],
    'extension name',
  );
  for (const c of candidates) if (c.def && !c.record.error) await setUp(p, services, c, store, areas);

  const live = () => candidates.filter((c) => c.record.status === 'loaded');
  const modulePrefix = rootOf(areas.byName('module'));
  const claimed = (c: Candidate) =>
    c.built!.groups.filter((g) => !g.prefix.startsWith(modulePrefix + '/')).map((g) => g.prefix);
  // Routes and claimed prefixes are only known once setup has run, so these clashes are found
  // after the extensions' migrations and setup: their schemas and migration records stay (they
  // are the extension's own and harmless), and their shutdown hooks run now, stopping any
  // timers or clients the setup started. A name clash is refused before anything runs.
  const setUpOnes = live();
  refuseClashes(setUpOnes, claimed, 'prefix');
  refuseClashes(live(), (c) => c.record.routes, 'route');
  for (const c of setUpOnes) if (c.record.status === 'failed') await c.built!.stop();

  for (const c of candidates) {
    if (c.record.status === 'loaded')
      p.log.info('extension loaded', {
        extension: c.record.name,
        version: c.record.version,
        routes: c.record.routes.length,
        migrations: c.record.migrations,
      });
    else p.log.error('extension failed', { extension: c.record.name, folder: c.record.folder, error: c.record.error });
  }
  const groups: ExtensionGroup[] = live().flatMap((c) =>
    c.built!.groups.map((g) => ({
      name: `extension:${c.record.name}${g.prefix.startsWith(modulePrefix + '/') ? '' : ':' + g.prefix}`,
      prefix: g.prefix,
      app: g.app,
    })),
  );
  return { records: candidates.map((c) => c.record), groups };
}
