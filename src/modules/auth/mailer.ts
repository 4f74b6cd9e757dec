/**
 * The two mails Public Auth sends, through the mail area's queue with the
 * `password_reset` and `verify_email` templates. Links point at the front-end page
 * named by a setting, or `<public base URL>/reset-password` / `/verify-email`.
 */
import type { Platform } from '../../platform';
import { ACTION_TOKEN_SECONDS, type Purpose } from './action-tokens';

const PAGE: Record<Purpose, { setting: string; path: string }> = {
  password_reset: { setting: 'auth.password_reset_url', path: '/reset-password' },
  verify_email: { setting: 'auth.verify_email_url', path: '/verify-email' },
};

export function mailConfigured(p: Platform): boolean {
  return p.services.mail.isConfigured();
}

/** The link a mail carries: the configured page, or one under the public base URL, with ?token=. */
export function actionLink(p: Platform, purpose: Purpose, token: string, origin: string): string {
  const page = PAGE[purpose];
  const configured = p.settings.get<string>(page.setting);
  const base = configured || (p.settings.get<string>('web.public_base_url') || origin).replace(/\/$/, '') + page.path;
  return `${base}${base.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}`;
}

export async function sendActionMail(p: Platform, purpose: Purpose, email: string, token: string, origin: string): Promise<void> {
  if (!mailConfigured(p)) return;
  await p.services.mail.enqueue({
    to: [email],
    template: purpose,
    variables: {
      app_name: p.settings.get<string>('app.name'),
      email,
      link: actionLink(p, purpose, token, origin),
      token,
      expires_in_minutes: ACTION_TOKEN_SECONDS[purpose] / 60,
    },
  });
}
