import type { Settings } from '../../config/settings';
import type { RuntimeConfigData } from './model';
import { trustedOrigin } from '../../http/trusted-origin';

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
  const separate = settings.get('web.public_api_separate');
  return {
    app_name: settings.get('app.name'),
    api_base_url: base.public + '/api',
    main_api_base_url: (separate ? base.main : base.public) + '/api',
    access_mode: settings.get('web.public_api_access_mode'),
    public_api_separate: separate,
    registration_open: settings.get('auth.registration_open'),
    email_verification_required: settings.get('auth.email_verification_required'),
    password_policy: { min_length: settings.get('auth.password_min_length'), max_length: 1024 },
    ...extra,
  };
}

/** The listeners' own origins as bound (web.port may be 0, "any free port"), recorded by listen(). */
const boundOrigins = new WeakMap<object, { main: string; public: string }>();

/** A wildcard bind address is no address a client can use: this machine's loopback stands in. */
const reachable = (origin: string) => origin.replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//127.0.0.1:');

export function recordListeners(platform: object, main: URL, pub: URL | undefined): void {
  boundOrigins.set(platform, { main: reachable(main.origin), public: reachable((pub ?? main).origin) });
}

/**
 * Base URLs for runtime config: the configured ones (web.public_base_url,
 * web.main_base_url); else the request's origin when it can be trusted (loopback or in
 * web.cors_origins), so a development set-up works through any local name; else the
 * listeners' own addresses — never an arbitrary Host header, which a cache or a
 * front-end would then hand to others (docs/configuration.md, "Runtime config").
 */
export function baseUrls(settings: Settings, platform: object, requestUrl: string): BaseUrls {
  const request = new URL(requestUrl);
  const trusted = trustedOrigin(settings.get('web.cors_origins'), request.origin);
  const bound = boundOrigins.get(platform);
  const mainPort = bound ? new URL(bound.main).port : String(settings.get('web.port'));
  const fromRequest = (port?: string) => {
    const u = new URL(request.origin);
    if (port !== undefined) u.port = port;
    return u.origin;
  };
  const pub = settings.get('web.public_base_url') || (trusted || !bound ? fromRequest() : bound.public);
  const main = settings.get('web.main_base_url') || (trusted || !bound ? fromRequest(mainPort) : bound.main);
  return { public: pub.replace(/\/$/, ''), main: main.replace(/\/$/, '') };
}
