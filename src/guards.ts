/**
 * The guards' inputs, wired to a platform in this one place: the keys module verifies
 * API keys, the live setting web.public_api_access_mode is the access mode
 * (docs/api-keys.md), Public Auth authenticates access tokens (docs/auth.md). Areas
 * take the guard plugin (src/http/guards.ts) from here.
 */
import type { Platform } from './platform';
import { guards, type GuardInputs } from './http/guards';
import type { KeyService } from './modules/keys/service';
import type { AuthService } from './modules/auth/service';

/** The services the guards use. */
export interface GuardServices {
  keys: Pick<KeyService, 'verify'>;
  auth: Pick<AuthService, 'authenticate'>;
}

export function guardInputs(p: Platform, { keys, auth }: GuardServices): GuardInputs {
  return {
    verify: (raw) => keys.verify(raw),
    accessMode: () => p.settings.get('web.public_api_access_mode'),
    authenticate: (token) => auth.authenticate(token),
  };
}

/** The guard plugin of this platform: `.use(platformGuards(p, p.services))`. */
export const platformGuards = (p: Platform, services: GuardServices) => guards(guardInputs(p, services));
