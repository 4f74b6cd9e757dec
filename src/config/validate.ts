import { Value } from '@sinclair/typebox/value';
import { SETTINGS_BY_KEY, schemaOf, type KnownSettingDef, type SettingDef, type SettingGetter } from './schema';

/** A setting that cannot be used; the message names the key and what is wrong. */
export class ConfigError extends Error {}

function expected(def: SettingDef): string {
  switch (def.kind) {
    case 'int':
      return `an integer from ${def.min} to ${def.max}`;
    case 'bool':
      return 'true or false';
    case 'enum':
      return `one of ${def.values!.join(', ')}`;
    case 'list':
      return 'a list of strings (comma-separated in the environment)';
    default:
      return def.expects ?? 'a string';
  }
}

export function lookup(key: string, where: string): KnownSettingDef {
  const def = SETTINGS_BY_KEY.get(key);
  if (!def) {
    const near = [...SETTINGS_BY_KEY.keys()].filter((k) => k.split('.')[0] === key.split('.')[0]);
    throw new ConfigError(
      `${where}: unknown setting '${key}'${near.length ? ` (known in this section: ${near.join(', ')})` : ''}`,
    );
  }
  return def;
}

/** Parse a value given as text (environment, command line). */
export function fromText(def: SettingDef, text: string, where: string): unknown {
  const t = text.trim();
  let v: unknown = t;
  if (def.kind === 'int') v = /^-?\d+$/.test(t) ? Number(t) : t;
  else if (def.kind === 'bool') v = t === 'true' || t === '1' ? true : t === 'false' || t === '0' ? false : t;
  else if (def.kind === 'json') v = safeJson(t);
  else if (def.kind === 'list')
    v =
      t === ''
        ? []
        : t.startsWith('[')
          ? safeJson(t)
          : t
              .split(',')
              .map((s) => s.trim())
              .filter(Boolean);
  return check(def, v, where);
}

function safeJson(t: string): unknown {
  try {
    return JSON.parse(t);
  } catch {
    return t;
  }
}

/** Validate a typed value (config file, database, JSON from the admin API). */
export function check(def: SettingDef, value: unknown, where: string): unknown {
  if (!Value.Check(schemaOf(def), value)) {
    const shown = def.secret ? '(hidden)' : JSON.stringify(value);
    throw new ConfigError(`${where}: ${def.key} must be ${expected(def)}, got ${shown}`);
  }
  const refused = def.refuse?.(value);
  if (refused) throw new ConfigError(`${where}: ${def.key} refused: ${refused}`);
  return value;
}

/**
 * Rules that span several keys, checked where all layers are known (before listening, and
 * when a setting is stored). `get` reads the value each key has or would have.
 */
export function checkCombination(get: SettingGetter): void {
  const port = get('web.port');
  if (get('web.public_api_separate') && port !== 0 && port === get('web.public_port')) {
    throw new ConfigError(
      `web.public_port: must differ from web.port (both ${port}) when web.public_api_separate is true`,
    );
  }
  if (get('database.direct_url') && get('database.pooler') !== 'transaction')
    throw new ConfigError(
      'database.direct_url: set only behind a transaction-mode pooler (database.pooler = transaction); without one database.url is already direct',
    );
  if (get('database.pooler') === 'transaction' && !get('database.url'))
    throw new ConfigError(
      'database.pooler: transaction applies to external PostgreSQL only; set database.url to the pooler, or leave database.pooler at none',
    );
}
