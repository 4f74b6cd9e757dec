/**
 * `services.extensions`: which extensions loaded, which failed and why — for the
 * logs, `basalt extensions list`, tests and (later) the admin API. Loading happens
 * once, when the listeners' apps are built (src/app.ts), so `basalt serve` and test
 * servers behave alike.
 */
import type { Platform } from '../platform';
import type { Areas } from '../http/areas';
import { resolveExtensionsDir } from './dir';
import { loadExtensions, type ExtensionRecord, type LoadedRecord } from './loader';
import type { ExtensionGroup, ExtensionServices } from './context';
import { ExtensionSettingsStore, type ExtensionSettings } from './settings-store';

export class ExtensionRegistry {
  /** The scanned directory (setting extensions.dir), absolute: see ./dir.ts for what a relative one means. */
  readonly dir: string;
  private records: LoadedRecord[] = [];
  private loading?: Promise<ExtensionGroup[]>;
  readonly store: ExtensionSettingsStore;

  constructor(
    private p: Platform,
    private services: ExtensionServices,
  ) {
    this.dir = resolveExtensionsDir(p.settings.get('extensions.dir'));
    this.store = new ExtensionSettingsStore(p.settings.layers, p.db);
  }

  /**
   * Scan, import and set up every extension (once); returns the route groups to mount.
   * `areas` is the route list's (src/app.ts): which prefixes an extension may claim.
   */
  load(areas: Areas): Promise<ExtensionGroup[]> {
    return (this.loading ??= (async () => {
      await this.store.load();
      await this.store.watch();
      this.p.onShutdown(() => this.store.close());
      const { records, groups } = await loadExtensions(this.p, this.services, this.dir, this.store, areas);
      this.records = records;
      return groups;
    })());
  }

  list(): ExtensionRecord[] {
    return this.records.map(({ settingsApi, ...r }) => ({
      ...r,
      routes: [...r.routes],
      migrations: [...r.migrations],
      settings: settingsApi?.list() ?? [],
    }));
  }

  get(name: string): ExtensionRecord | undefined {
    return this.list().find((r) => r.name === name);
  }

  /** Whether `name` is loaded and serving. */
  isLoaded(name: string): boolean {
    return this.records.some((r) => r.name === name && r.status === 'loaded');
  }

  /** The settings of a loaded extension (admin panel, `basalt settings`). */
  settings(name: string): ExtensionSettings | undefined {
    return this.records.find((r) => r.name === name && r.status === 'loaded')?.settingsApi;
  }
}

export function createExtensionRegistry(p: Platform, services: ExtensionServices): ExtensionRegistry {
  return new ExtensionRegistry(p, services);
}
