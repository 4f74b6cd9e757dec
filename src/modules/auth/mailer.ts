/**
 * The two mails Public Auth sends, through the mail area's queue with the
 * `password_reset` and `verify_email` templates. Links point at the front-end page
 * named by a setting, or `<public base URL>/reset-password` / `/verify-email`.
 */
import type { Platform } from '../../platform';
import type { SettingKey } from '../../config/schema';
import type { MailService } from '../mail/service';
import { ACTION_TOKEN_SECONDS, type Purpose } from './action-tokens';
import { trustedOrigin } from '../../http/trusted-origin';

const PAGE = {
  password_reset: { setting: 'auth.password_reset_url', path: '/reset-password' },
  verify_email: { setting: 'auth.verify_email_url', path: '/verify-email' },
} as const satisfies Record<Purpose, { setting: SettingKey; path: string }>;

/**
 * Where a mail's link points: the configured page, or `/reset-password` / `/verify-email`
 * under `web.public_base_url`. With neither set, under the request's origin, but only when
 * that origin can be trusted: a loopback host (development) or a front-end origin listed in
 * `web.cors_origins`. Any other Host header may be an attacker's (password-reset
 * poisoning: the victim's token would travel to their site), so null: no mail is sent
 * (docs/auth.md, "Links in mails").
 */
export function linkBase(p: Platform, purpose: Purpose, origin: string): string | null {
  const page = PAGE[purpose];
  const configured = p.settings.get(page.setting);
  if (configured) return configured;
  const base = p.settings.get('web.public_base_url');
  if (base) return base.replace(/\/$/, '') + page.path;
  return trustedOrigin(p.settings.get('web.cors_origins'), origin) ? origin.replace(/\/$/, '') + page.path : null;
}

/** The link a mail carries, with ?token= (or &token=). */
export function actionLink(base: string, token: string): string {
  return `${base}${base.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}`;
}

/**
 * Queue the mail of `purpose` to `email`. The token is issued only when a mail will carry
 * it: not without mail, and not when no trustworthy link can be built (logged with what to set).
 */
export async function sendActionMail(
  p: Platform,
  mail: MailService,
  purpose: Purpose,
  email: string,
  issueToken: () => Promise<string>,
  origin: string,
): Promise<void> {
  if (!mail.isConfigured()) return;
  const base = linkBase(p, purpose, origin);
  if (!base) {
    p.log.warn(
      `${purpose} mail not sent: no trusted base for its link; set web.public_base_url (or ${PAGE[purpose].setting})`,
      { request_origin: origin.slice(0, 200) },
    );
    return;
  }
  const token = await issueToken();
  await mail.enqueue({
    to: [email],
    template: purpose,
    variables: {
      app_name: p.settings.get('app.name'),
      email,
      link: actionLink(base, token),
      token,
      expires_in_minutes: ACTION_TOKEN_SECONDS[purpose] / 60,
    },
  });
}
