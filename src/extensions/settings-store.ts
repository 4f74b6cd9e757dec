/**
 * Extension settings (`ext.<name>.<key>`). Extensions declare their keys at run
 * time, so they cannot live in the platform's fixed list (src/config/schema.ts);
 * they use the same layers and the same validation instead:
 * environment `BASALT_EXT_<NAME>_<KEY>` > `[ext.<name>]` in basalt.toml >
 * table `basalt.extension_settings` > the declared default. Database values reach
 * every instance within a second (NOTIFY, through the platform settings' watcher:
 * src/config/settings-watch.ts).
 */
import type { Db, Queryable } from '../db/engine';
import { extensionEnvName, type BootLayers, type Source } from '../config/load';
import type { SettingDef } from '../config/schema';
import { ConfigError, check, fromText } from '../config/validate';
import { SettingsWatch, changedKeys } from '../config/settings-watch';

const CHANNEL = 'basalt_ext_settings';

/** A setting an extension reads through `ctx.settings`, stored as `ext.<name>.<key>`. */
export interface ExtensionSettingDef {
  kind: 'string' | 'int' | 'bool' | 'list';
  default: string | number | boolean | string[];
  description: string;
  /** Never shown in full by the admin panel or logs (passwords, access keys). */
  secret?: boolean;
  /** Bounds of an `int`. */
  min?: number;
  max?: number;
}

export interface ExtensionSettingView {
  key: string;
  value: unknown;
  source: Source;
  origin?: string;
  secret: boolean;
  description: string;
}

/** Settings of one extension, as `ctx.settings`. */
export interface ExtensionSettings {
  /** Live value: env > file > database > default. Unknown key → error naming the known ones. */
  get<T = unknown>(key: string): T;
  /**
   * Store a value in the database (validated); every instance sees it within a second.
   * With `tx` (the admin API, which writes its audit row in it) the change is announced
   * at commit and the caller reloads the store after.
   */
  set(key: string, value: unknown, tx?: Queryable): Promise<void>;
  /** Back to file/default. */
  unset(key: string, tx?: Queryable): Promise<void>;
  /** A value given as text (command line, form field) parsed by the key's kind; throws naming the key. */
  parse(key: string, text: string): unknown;
  list(): ExtensionSettingView[];
  /** Called with changed keys when the database layer changes. */
  onChange(fn: (keys: string[]) => void): () => void;
}

function toDef(extension: string, key: string, d: ExtensionSettingDef): SettingDef {
  return {
    key: `ext.${extension}.${key}`,
    kind: d.kind,
    default: d.default,
    min: d.min,
    max: d.max,
    secret: d.secret,
    description: d.description,
    env: [extensionEnvName(extension, key)],
  };
}

/** All extensions' stored settings, loaded once and kept fresh. */
export class ExtensionSettingsStore {
  private stored = new Map<string, Map<string, unknown>>();
  private listeners = new Set<(extension: string, keys: string[]) => void>();
  private watcher: SettingsWatch;

  constructor(
    private layers: BootLayers,
    private db: Db,
  ) {
    this.watcher = new SettingsWatch(db, CHANNEL, () => this.load());
  }

  async load(): Promise<void> {
    const { rows } = await this.db.query<{ extension: string; key: string; value: unknown }>(
      'SELECT extension, key, value FROM basalt.extension_settings',
    );
    const next = new Map<string, Map<string, unknown>>();
    for (const r of rows) {
      if (!next.has(r.extension)) next.set(r.extension, new Map());
      next.get(r.extension)!.set(r.key, r.value);
    }
    const old = this.stored;
    this.stored = next;
    for (const ext of new Set([...old.keys(), ...next.keys()])) {
      const changed = changedKeys(old.get(ext) ?? new Map(), next.get(ext) ?? new Map());
      if (changed.length) for (const l of this.listeners) l(ext, changed);
    }
  }

  watch(): Promise<void> {
    return this.watcher.start();
  }

  close(): Promise<void> {
    return this.watcher.stop();
  }

  /** The settings view given to one extension; validates pinned values now so a typo fails its load. */
  forExtension(extension: string, declared: Record<string, ExtensionSettingDef> = {}): ExtensionSettings {
    const defs = new Map(Object.entries(declared).map(([k, d]) => [k, toDef(extension, k, d)]));
    const pinned = new Map<string, { value: unknown; source: Source; origin: string }>();
    for (const [key, def] of defs) {
      const given = this.layers.extension.get(extensionEnvName(extension, key));
      if (!given) continue;
      const value =
        typeof given.value === 'string' && given.source === 'env'
          ? fromText(def, given.value, given.origin)
          : check(def, given.value, given.origin);
      pinned.set(key, { value, source: given.source, origin: given.origin });
    }
    const defOf = (key: string) => {
      const d = defs.get(key);
      if (!d)
        throw new ConfigError(
          `extension ${extension}: unknown setting '${key}' (declared: ${[...defs.keys()].join(', ') || 'none'})`,
        );
      return d;
    };
    const stored = (key: string) => this.stored.get(extension)?.get(key);
    const current = (key: string) => {
      const def = defOf(key);
      if (pinned.has(key)) return pinned.get(key)!.value;
      const s = stored(key);
      // A stored value that no longer fits the declaration (the extension changed) falls back to the default.
      if (s !== undefined) {
        try {
          return check(def, s, 'stored setting');
        } catch {}
      }
      return def.default;
    };
    const write = async (key: string, value: unknown | undefined, tx?: Queryable) => {
      const def = defOf(key);
      const q = tx ?? this.db;
      if (value === undefined) {
        await q.query('DELETE FROM basalt.extension_settings WHERE extension = $1 AND key = $2', [extension, key]);
      } else {
        check(def, value, 'settings');
        await q.query(
          `INSERT INTO basalt.extension_settings (extension, key, value, updated_at) VALUES ($1, $2, $3::jsonb, now())
           ON CONFLICT (extension, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
          [extension, key, JSON.stringify(value)],
        );
      }
      await this.watcher.announce(extension, tx);
    };
    return {
      get: <T>(key: string) => current(key) as T,
      set: (key, value, tx) => write(key, value, tx),
      unset: (key, tx) => write(key, undefined, tx),
      parse: (key, text) => fromText(defOf(key), text, 'value'),
      list: () =>
        [...defs.entries()].map(([key, def]) => {
          const p = pinned.get(key);
          const source: Source = p ? p.source : stored(key) !== undefined ? 'database' : 'default';
          const value = current(key);
          return {
            key,
            value: def.secret && typeof value === 'string' && value ? '••••••' : value,
            source,
            origin: p?.origin,
            secret: !!def.secret,
            description: def.description,
          };
        }),
      onChange: (fn) => {
        const l = (ext: string, keys: string[]) => ext === extension && fn(keys);
        this.listeners.add(l);
        return () => this.listeners.delete(l);
      },
    };
  }
}
