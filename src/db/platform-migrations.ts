/**
 * The platform schema `basalt`, one ordered list of steps embedded in the executable:
 * SQL files, and TypeScript steps (`run`) where SQL cannot do the work (IDNA in 140).
 * Append only: never edit a step that has shipped; add the next number.
 */
import m001 from './migrations/001_core.sql' with { type: 'text' };
import m010 from './migrations/010_api_keys.sql' with { type: 'text' };
import m030 from './migrations/030_auth.sql' with { type: 'text' };
import m040 from './migrations/040_mail.sql' with { type: 'text' };
import m041 from './migrations/041_mail_default_templates.sql' with { type: 'text' };
import m050 from './migrations/050_extensions.sql' with { type: 'text' };
import m060 from './migrations/060_users_email_nfkc.sql' with { type: 'text' };
import m070 from './migrations/070_admin.sql' with { type: 'text' };
import m080 from './migrations/080_mail_keys_on_jobs.sql' with { type: 'text' };
import m090 from './migrations/090_email_soft_dotted.sql' with { type: 'text' };
import m100 from './migrations/100_user_roles.sql' with { type: 'text' };
import m110 from './migrations/110_realtime.sql' with { type: 'text' };
import m120 from './migrations/120_auth_sign_in_methods.sql' with { type: 'text' };
import m130 from './migrations/130_audit_actor.sql' with { type: 'text' };
import type { Queryable } from './engine';
import { emailIdnDomains } from './migrations/140_email_idn_domains';
import m150 from './migrations/150_realtime_resume.sql' with { type: 'text' };
import { sealTotpSecrets } from './migrations/160_totp_sealed';
import m170 from './migrations/170_auth_ownership.sql' with { type: 'text' };
import m175 from './migrations/175_realtime_visible.sql' with { type: 'text' };
import m180 from './migrations/180_jobs_cron_hooks.sql' with { type: 'text' };
import m190 from './migrations/190_request_log.sql' with { type: 'text' };

/** A step: SQL run as one script, or a function given the migration transaction. */
export type PlatformMigration = { name: string; sql: string } | { name: string; run: (tx: Queryable) => Promise<void> };

export const platformMigrations: PlatformMigration[] = [
  { name: '001_core', sql: m001 },
  { name: '010_api_keys', sql: m010 },
  { name: '030_auth', sql: m030 },
  { name: '040_mail', sql: m040 },
  { name: '041_mail_default_templates', sql: m041 },
  { name: '050_extensions', sql: m050 },
  { name: '060_users_email_nfkc', sql: m060 },
  { name: '070_admin', sql: m070 },
  { name: '080_mail_keys_on_jobs', sql: m080 },
  { name: '090_email_soft_dotted', sql: m090 },
  { name: '100_user_roles', sql: m100 },
  { name: '110_realtime', sql: m110 },
  { name: '120_auth_sign_in_methods', sql: m120 },
  { name: '130_audit_actor', sql: m130 },
  { name: '140_email_idn_domains', run: emailIdnDomains },
  { name: '150_realtime_resume', sql: m150 },
  { name: '160_totp_sealed', run: sealTotpSecrets },
  { name: '170_auth_ownership', sql: m170 },
  { name: '175_realtime_visible', sql: m175 },
  { name: '180_jobs_cron_hooks', sql: m180 },
  { name: '190_request_log', sql: m190 },
];
