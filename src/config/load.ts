import { existsSync, readFileSync } from 'node:fs';
import { parse as parseToml } from 'smol-toml';
import { SETTINGS, envNames, type SettingKey, type SettingValue } from './schema';
import { ConfigError, check, checkCombination, fromText, lookup } from './validate';

export type Source = 'flag' | 'env' | 'file' | 'database' | 'default';

export interface Pinned {
  value: unknown;
  source: Source;
  /** e.g. `BASALT_WEB_PORT`, `basalt.toml`, `--data`. */
  origin: string;
}

/** Configuration known before the database is open: flags > environment > file. */
export interface BootLayers {
  pinned: Map<string, Pinned>;
  configFile?: string;
  /**
   * Extension settings given in the environment (`BASALT_EXT_<NAME>_<KEY>`) or the
   * config file (`[ext.<name>] key = …`), by canonical name (see `extensionEnvName`).
   * Extensions declare their keys at run time, so these are checked when they load.
   */
  extension: Map<string, Pinned>;
}

/** `BASALT_EXT_MEDIA_LIBRARY_S3_BUCKET` for extension `media-library`, key `s3_bucket`. */
export function extensionEnvName(extension: string, key: string): string {
  return 'BASALT_EXT_' + `${extension}_${key}`.toUpperCase().replace(/[^A-Z0-9]/g, '_');
}

export interface LoadOptions {
  env?: Record<string, string | undefined>;
  /** `--config FILE`; without it `./basalt.toml` is read when present. */
  configFile?: string;
  /** Command-line flags mapped to keys (`--data` → data.dir). */
  flags?: Record<string, unknown>;
}

// BASALT_* variables that are not settings.
const NON_SETTING_ENV = [/^BASALT_CONFIG$/, /^BASALT_TEST_/, /^BASALT_BENCH_/];

function flatten(obj: Record<string, unknown>, prefix: string, out: Map<string, unknown>) {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date))
      flatten(v as Record<string, unknown>, key, out);
    else out.set(key, v);
  }
}

export function loadBootLayers(opts: LoadOptions = {}): BootLayers {
  const env = opts.env ?? process.env;
  const pinned = new Map<string, Pinned>();
  const extension = new Map<string, Pinned>();

  const file = opts.configFile ?? env.BASALT_CONFIG ?? (existsSync('basalt.toml') ? 'basalt.toml' : undefined);
  if (file) {
    if (!existsSync(file)) throw new ConfigError(`--config: file ${file} does not exist`);
    let doc: Record<string, unknown>;
    try {
      doc = parseToml(readFileSync(file, 'utf8')) as Record<string, unknown>;
    } catch (e) {
      throw new ConfigError(`${file}: not valid TOML: ${(e as Error).message.split('\n')[0]}`);
    }
    const flat = new Map<string, unknown>();
    flatten(doc, '', flat);
    for (const [key, raw] of flat) {
      const ext = /^ext\.([^.]+)\.(.+)$/.exec(key);
      if (ext) {
        extension.set(extensionEnvName(ext[1]!, ext[2]!), { value: raw, source: 'file', origin: file });
        continue;
      }
      const def = lookup(key, file);
      pinned.set(key, { value: check(def, raw, file), source: 'file', origin: file });
    }
  }

  const known = new Set<string>();
  for (const def of SETTINGS) {
    for (const name of envNames(def)) {
      known.add(name);
      const raw = env[name];
      if (raw === undefined || raw === '') continue;
      pinned.set(def.key, { value: fromText(def, raw, name), source: 'env', origin: name });
      break;
    }
  }
  for (const name of Object.keys(env)) {
    if (name.startsWith('BASALT_EXT_')) {
      if (env[name]) extension.set(name, { value: env[name], source: 'env', origin: name });
      continue;
    }
    if (name.startsWith('BASALT_') && !known.has(name) && !NON_SETTING_ENV.some((r) => r.test(name))) {
      throw new ConfigError(
        `environment: unknown variable ${name} (settings are BASALT_<SECTION>_<NAME>, e.g. BASALT_WEB_PORT; see 'basalt settings list')`,
      );
    }
  }

  for (const [flag, v] of Object.entries(opts.flags ?? {})) {
    if (v === undefined) continue;
    const [key, name] = flag.split('|') as [string, string];
    const def = lookup(key, name ?? key);
    pinned.set(key, {
      value: typeof v === 'string' ? fromText(def, v, name ?? key) : check(def, v, name ?? key),
      source: 'flag',
      origin: name ?? key,
    });
  }
  // When every key of a rule is pinned, the database cannot change the outcome: fail before opening it.
  // (The rule's other keys read as pinned or default, as they will at start.)
  const layers: BootLayers = { pinned, configFile: file, extension };
  if (['web.port', 'web.public_port', 'web.public_api_separate'].every((k) => pinned.has(k)))
    checkCombination((k) => bootValue(layers, k));
  return layers;
}

/** Value of a boot-time key before the database is open: pinned or default. */
export function bootValue<K extends SettingKey>(layers: BootLayers, key: K): SettingValue<K> {
  const p = layers.pinned.get(key);
  return (p ? p.value : lookup(key, 'internal').default) as SettingValue<K>;
}
