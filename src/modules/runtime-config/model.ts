/** The runtime config answer (docs/configuration.md), in its area's envelope; its type is the schema's. */
import { t, type Static } from 'elysia';
import { AREA } from '../../http/areas';
import { successOf } from '../../http/envelope-schemas';

export const RuntimeConfigData = t.Object({
  app_name: t.String(),
  api_base_url: t.String({ description: 'Public API base: auth, database, extensions, runtime config.' }),
  main_api_base_url: t.String({
    description: 'Main listener API base: mail and files. Equal to api_base_url unless public_api_separate is true.',
  }),
  access_mode: t.Union([t.Literal('open'), t.Literal('api_key_required')]),
  public_api_separate: t.Boolean(),
  registration_open: t.Boolean(),
  email_verification_required: t.Boolean(),
  password_policy: t.Object({ min_length: t.Integer(), max_length: t.Integer() }),
  site_public_key: t.Optional(
    t.String({ description: 'Present in api_key_required mode when a site public key is designated.' }),
  ),
});
export type RuntimeConfigData = Static<typeof RuntimeConfigData>;

export const RuntimeConfig = successOf(AREA.runtime_config)(RuntimeConfigData, {
  title: 'RuntimeConfig',
  description: 'Public front-end parameters.',
});
