import type { Db, Queryable } from '../db/engine';
import { SETTINGS, SETTINGS_BY_KEY, envNames, type SettingKey, type SettingValue } from './schema';
import type { BootLayers, Source } from './load';
import { ConfigError, check, checkCombination, lookup } from './validate';
import { SettingsWatch, changedKeys } from './settings-watch';

const CHANNEL = 'basalt_settings';
/** Keys needed to open the database cannot live in it. */
const NOT_IN_DATABASE = new Set(['database.url', 'database.direct_url', 'database.pooler', 'data.dir']);

export interface SettingView {
  key: string;
  value: unknown;
  source: Source;
  origin?: string;
  restart: boolean;
  secret: boolean;
  description: string;
}

/**
 * Live settings: flags > environment > config file > database > defaults.
 * Database values reach every instance within a second: writes NOTIFY, every
 * instance LISTENs, and a poll covers a lost notification (./settings-watch.ts).
 */
export class Settings {
  private stored = new Map<string, unknown>();
  private listeners = new Set<(keys: string[]) => void>();
  private watcher?: SettingsWatch;

  /** Stored values that were refused and left out (`tolerant` mode): key → why. */
  readonly refused = new Map<string, string>();

  constructor(
    readonly layers: BootLayers,
    private db?: Db,
    /**
     * Leave out a stored value that fails validation (with the reason in `refused`)
     * instead of refusing to open: the commands that repair settings must run whatever
     * was stored (`basalt settings unset`).
     */
    private tolerant = false,
  ) {
    if (db) this.watcher = new SettingsWatch(db, CHANNEL, () => this.load());
  }

  /** A setting's value, typed by its key as src/config/schema.ts declares it. */
  get<K extends SettingKey>(key: K): SettingValue<K> {
    return this.getUntyped(key) as SettingValue<K>;
  }

  /**
   * A setting named only at run time (an extension asking by name): its value, untyped.
   * Code that knows the key uses `get`.
   */
  getUntyped(key: string): unknown {
    const p = this.layers.pinned.get(key);
    if (p) return p.value;
    if (this.stored.has(key)) return this.stored.get(key);
    const def = SETTINGS_BY_KEY.get(key);
    if (!def) throw new ConfigError(`internal: unknown setting '${key}'`);
    return def.default;
  }

  source(key: string): { source: Source; origin?: string } {
    const p = this.layers.pinned.get(key);
    if (p) return { source: p.source, origin: p.origin };
    if (this.stored.has(key)) return { source: 'database' };
    return { source: 'default' };
  }

  list(): SettingView[] {
    return SETTINGS.map((d) => {
      const { source, origin } = this.source(d.key);
      return {
        key: d.key,
        value: d.secret ? mask(this.get(d.key)) : this.get(d.key),
        source,
        origin,
        restart: !!d.restart,
        secret: !!d.secret,
        description: d.description,
      };
    });
  }

  /** Read the database layer. Invalid stored values are reported, not silently used. */
  async load(): Promise<void> {
    if (!this.db) return;
    const { rows } = await this.db.query<{ key: string; value: unknown }>('SELECT key, value FROM basalt.settings');
    const next = new Map<string, unknown>();
    for (const r of rows) {
      const def = SETTINGS_BY_KEY.get(r.key);
      if (!def) continue; // a key from a newer version: ignore rather than refuse to start
      try {
        next.set(r.key, check(def, r.value, 'stored setting'));
      } catch (e) {
        if (!(e instanceof ConfigError)) throw e;
        const fix = `remove it with 'basalt settings unset ${r.key}'`;
        if (!this.tolerant) throw new ConfigError(`${e.message}; ${fix}`);
        this.refused.set(r.key, e.message);
      }
    }
    const changed = changedKeys(next, this.stored);
    this.stored = next;
    if (changed.length) for (const l of this.listeners) l([...changed]);
  }

  /**
   * Store a value in the database layer; every instance sees it within a second.
   * With `tx` the write joins the caller's transaction (the admin API writes its audit
   * row in it): the notification goes out at commit, and the caller calls `load()` after.
   */
  async set(key: string, value: unknown, tx?: Queryable): Promise<{ pinnedBy?: string }> {
    const def = lookup(key, 'settings');
    if (NOT_IN_DATABASE.has(key))
      throw new ConfigError(
        `settings: ${key} cannot be stored in the database; set ${envNames(def)[0]} or put it in basalt.toml`,
      );
    check(def, value, 'settings');
    if (key.startsWith('web.') && !this.layers.pinned.has(key))
      checkCombination(<K extends SettingKey>(k: K) => (k === key ? value : this.get(k)) as SettingValue<K>);
    if (!this.db) throw new ConfigError('settings: no database');
    await (tx ?? this.db).query(
      `INSERT INTO basalt.settings (key, value, updated_at) VALUES ($1, $2::jsonb, now())
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
      [key, JSON.stringify(value)],
    );
    await this.watcher!.announce(key, tx);
    const p = this.layers.pinned.get(key);
    return { pinnedBy: p?.origin };
  }

  /** Remove the database value (back to file/default). `tx` as in `set`. */
  async unset(key: string, tx?: Queryable): Promise<void> {
    lookup(key, 'settings');
    if (!this.db) return;
    await (tx ?? this.db).query('DELETE FROM basalt.settings WHERE key = $1', [key]);
    await this.watcher!.announce(key, tx);
  }

  /** Called with the changed keys whenever the database layer changes. */
  onChange(fn: (keys: string[]) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  async watch(): Promise<void> {
    if (!this.db || !this.watcher) return;
    await this.watcher.start();
  }

  async close(): Promise<void> {
    await this.watcher?.stop();
  }
}

function mask(v: unknown): unknown {
  if (v === '' || v === null || v === undefined || (Array.isArray(v) && v.length === 0)) return v;
  if (typeof v !== 'string' && typeof v !== 'object') return v;
  return '••••••';
}
