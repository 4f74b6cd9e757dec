import type { Settings } from '../../config/settings';
import type { RuntimeConfigData } from './model';

/** Base URLs (no trailing slash) as clients reach them. */
export interface BaseUrls {
  /** Public API: auth, database, extensions (the public listener when split). */
  public: string;
  /** Main listener: mail, files. Same as `public` when the split is off. */
  main: string;
}

/**
 * What a front-end may know before signing in (docs/configuration.md). Built from an explicit
 * list of settings, never from the whole settings map, so a secret cannot leak in.
 */
export function runtimeConfig(
  settings: Settings,
  base: BaseUrls,
  extra: Partial<RuntimeConfigData> = {},
): RuntimeConfigData {
  const separate = settings.get<boolean>('web.public_api_separate');
  return {
    app_name: settings.get<string>('app.name'),
    api_base_url: base.public + '/api',
    main_api_base_url: (separate ? base.main : base.public) + '/api',
    access_mode: settings.get<RuntimeConfigData['access_mode']>('web.public_api_access_mode'),
    public_api_separate: separate,
    registration_open: settings.get<boolean>('auth.registration_open'),
    email_verification_required: settings.get<boolean>('auth.email_verification_required'),
    password_policy: { min_length: settings.get<number>('auth.password_min_length'), max_length: 1024 },
    ...extra,
  };
}

/**
 * The main listener's port as bound (web.port may be 0, "any free port"), recorded by
 * listen() so the public listener can tell clients where mail and files live.
 */
const boundMainPorts = new WeakMap<object, number>();

export function recordMainPort(platform: object, port: number): void {
  boundMainPorts.set(platform, port);
}

/**
 * The main listener's base URL: web.main_base_url when set (behind a proxy), otherwise
 * the URL the client used for this request with the main listener's port.
 */
export function mainBaseUrl(settings: Settings, platform: object, requestUrl: string): string {
  const configured = settings.get<string>('web.main_base_url');
  if (configured) return configured.replace(/\/$/, '');
  const u = new URL(requestUrl);
  u.port = String(boundMainPorts.get(platform) ?? settings.get<number>('web.port'));
  return u.origin;
}
