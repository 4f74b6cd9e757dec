/**
 * Settings as the admin API shows and changes them (docs/admin-api.md §Settings),
 * on top of src/config/settings.ts: one list, one validation, one store. A setting
 * pinned by the environment or the config file cannot be changed here (409, naming
 * where); a stored change and its audit row share one transaction.
 */
import type { Basalt } from '../../services';
import { SETTINGS, SETTINGS_BY_KEY, type KnownSettingDef, type SettingDef } from '../../config/schema';
import { ConfigError, check } from '../../config/validate';
import type { Actor } from './audit';
import { AdminErrors } from './errors';

export interface SettingInfo {
  key: string;
  group: string;
  value: unknown;
  default: unknown;
  source: 'default' | 'database' | 'file' | 'environment';
  pinned_by: string | null;
  /** Changed only from the command line, the environment or the config file: why (docs/admin-api.md §Settings). */
  operator_only: string | null;
  live: boolean;
  type: SettingDef['kind'];
  values?: string[];
  min?: number;
  max?: number;
  description: string;
  secret: boolean;
  /** Whether the setting holds a value (not empty): for a secret, whose value is never shown, the only sign that it is configured. */
  is_set: boolean;
}

/** Where a value comes from, in the panel's words (a command-line flag counts as environment). */
function sourceOf(s: string): SettingInfo['source'] {
  if (s === 'env' || s === 'flag') return 'environment';
  return s as SettingInfo['source'];
}

export function settingInfo(p: Basalt, def: KnownSettingDef): SettingInfo {
  const { source, origin } = p.settings.source(def.key);
  const secret = !!def.secret;
  const current = p.settings.get(def.key);
  return {
    key: def.key,
    group: def.key.split('.')[0]!,
    value: secret ? null : current,
    default: secret ? null : def.default,
    source: sourceOf(source),
    pinned_by: source === 'env' || source === 'file' || source === 'flag' ? (origin ?? source) : null,
    operator_only: def.operatorOnly ?? null,
    live: !def.restart,
    type: def.kind,
    ...(def.values ? { values: [...def.values] } : {}),
    ...(def.min !== undefined ? { min: def.min, max: def.max } : {}),
    description: def.description,
    secret,
    is_set: !(
      current === undefined ||
      current === null ||
      current === '' ||
      (Array.isArray(current) && !current.length)
    ),
  };
}

export function listSettings(p: Basalt): SettingInfo[] {
  return SETTINGS.map((d) => settingInfo(p, d));
}

function known(key: string): KnownSettingDef {
  const def = SETTINGS_BY_KEY.get(key);
  if (!def) throw AdminErrors.notFound(`The setting '${key.slice(0, 100)}'`);
  return def;
}

/**
 * Store a value (or with `value === undefined`, remove the stored one: back to file/default),
 * audited. A pinned setting is refused (409) unless `storePinned` (the command line stores it
 * anyway and says that the pin wins).
 */
export async function changeSetting(
  p: Basalt,
  actor: Actor,
  key: string,
  value: unknown,
  opts: { storePinned?: boolean } = {},
): Promise<SettingInfo> {
  const def = known(key);
  const pinned = settingInfo(p, def).pinned_by;
  if (pinned && !opts.storePinned) throw AdminErrors.settingPinned(key, pinned);
  // Removing a stored value (back to the file or the default) stays allowed: it undoes, never widens.
  // The operator's own command line may set such a setting; the panel may not.
  if (def.operatorOnly && value !== undefined && actor.kind !== 'cli')
    throw AdminErrors.settingOperatorOnly(key, def.operatorOnly);
  const before = p.settings.source(key).source === 'database' ? p.settings.get(def.key) : undefined;
  try {
    if (value !== undefined) check(def, value, 'value');
    await p.services.admin.audited(actor, value === undefined ? 'settings.unset' : 'settings.set', async (tx, note) => {
      if (value === undefined) await p.settings.unset(key, tx);
      else await p.settings.set(key, value, tx);
      const shown = (v: unknown) => (def.secret && v !== undefined ? '[redacted]' : v);
      note(key, { before: shown(before) ?? null, after: value === undefined ? null : shown(value) });
    });
  } catch (e) {
    // The message names the key and what it must be (never echoing a secret value).
    if (e instanceof ConfigError) throw AdminErrors.field(key, e.message.replace(/^value: /, ''));
    throw e;
  }
  await p.settings.load(); // this instance answers with the new value; others follow via NOTIFY
  return settingInfo(p, def);
}
