import type { Settings } from '../../config/settings';

/**
 * What a front-end may know before signing in (CONTRACT §11). Built from an explicit
 * list of settings, never from the whole settings map, so a secret cannot leak in.
 */
export function runtimeConfig(settings: Settings, baseUrl: string, extra: Record<string, unknown> = {}) {
  const separate = settings.get<boolean>('web.public_api_separate');
  return {
    app_name: settings.get<string>('app.name'),
    api_base_url: baseUrl + '/api',
    access_mode: settings.get<string>('web.public_api_access_mode'),
    public_api_separate: separate,
    registration_open: settings.get<boolean>('auth.registration_open'),
    email_verification_required: settings.get<boolean>('auth.email_verification_required'),
    password_policy: { min_length: settings.get<number>('auth.password_min_length'), max_length: 1024 },
    ...extra,
  };
}
