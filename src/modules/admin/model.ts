/**
 * Request bodies and queries of the admin API (docs/admin-api.md), declared once;
 * validation failures answer 400 `validation_error` naming the field. Rules that need
 * more than a shape (key permissions, setting values) are the services' own checks.
 */
import { t } from 'elysia';

const Email = t.String({ minLength: 1, maxLength: 320 });
const Password = t.String({ minLength: 1, maxLength: 4096 });

export const Bodies = {
  setup: t.Object({ token: t.String({ minLength: 1, maxLength: 200 }), email: Email, password: Password }),
  login: t.Object({ email: Email, password: Password }),
  password: t.Object({ current_password: Password, new_password: Password }),
  /** Every field optional here: KeyService's validation names what is wrong. */
  createKey: t.Object({
    type: t.Optional(t.Unknown()),
    name: t.Optional(t.Unknown()),
    service: t.Optional(t.Unknown()),
    permissions: t.Optional(t.Unknown()),
    tables: t.Optional(t.Unknown()),
    expires_at: t.Optional(t.Unknown()),
    site: t.Optional(t.Boolean()),
  }),
  value: t.Object({ value: t.Unknown() }),
  /** Shapes only: checkUserInput (auth/admin-users.ts) names every field that is wrong at once. */
  createUser: t.Object({
    email: t.Optional(t.Unknown()),
    password: t.Optional(t.Unknown()),
    verified: t.Optional(t.Boolean()),
  }),
  userPassword: t.Object({ password: t.Optional(t.Unknown()) }),
  userEmail: t.Object({ email: t.Optional(t.Unknown()) }),
  mailTest: t.Object({ to: t.String({ minLength: 3, maxLength: 320 }) }),
  templateTest: t.Object({
    to: t.String({ minLength: 3, maxLength: 320 }),
    variables: t.Optional(t.Record(t.String(), t.Unknown())),
  }),
  template: t.Object({
    subject: t.String({ maxLength: 998 }),
    html: t.Optional(t.Nullable(t.String())),
    text: t.Optional(t.Nullable(t.String())),
  }),
  preview: t.Object({
    subject: t.String({ maxLength: 998 }),
    html: t.Optional(t.Nullable(t.String())),
    text: t.Optional(t.Nullable(t.String())),
    variables: t.Optional(t.Record(t.String(), t.Unknown())),
  }),
};

const Limit = t.Optional(t.Numeric({ minimum: 1, maximum: 500 }));
const When = t.Optional(t.String({ format: 'date-time' }));

export const Queries = {
  audit: t.Object({
    admin: t.Optional(t.String()),
    action: t.Optional(t.String()),
    target: t.Optional(t.String()),
    since: When,
    until: When,
    limit: Limit,
    before: t.Optional(t.String({ pattern: '^[0-9]{1,19}$' })),
  }),
  jobs: t.Object({
    state: t.Optional(t.String()),
    recipient: t.Optional(t.String()),
    since: When,
    until: When,
    limit: Limit,
    before: t.Optional(t.String()),
  }),
  users: t.Object({
    search: t.Optional(t.String({ maxLength: 320 })),
    limit: Limit,
    offset: t.Optional(t.Numeric({ minimum: 0, maximum: 1_000_000 })),
  }),
};
