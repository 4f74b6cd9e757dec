/**
 * Request bodies and queries of the admin API (docs/admin-api.md), declared once;
 * validation failures answer 400 `validation_error` naming the field. Rules that need
 * more than a shape (key permissions, setting values) are the services' own checks.
 * Each route takes its `body` from `Bodies`, and the panel types what it sends from the
 * same objects (`body('name', …)` in src/admin-ui/api.ts), as it does answers from
 * responses.ts: a renamed field fails `tsc` on both sides.
 */
import { t } from 'elysia';

const Email = t.String({ minLength: 1, maxLength: 320 });
const Password = t.String({ minLength: 1, maxLength: 4096 });
/** A row, or a row's key: column → value as the Database API encodes it. */
const Data = t.Record(t.String(), t.Unknown());
const Role = t.Union([t.Literal('basalt_user'), t.Literal('basalt_anon')]);
const PolicyName = t.String({ minLength: 1, maxLength: 63 });
const Privilege = t.Union([t.Literal('SELECT'), t.Literal('INSERT'), t.Literal('UPDATE'), t.Literal('DELETE')]);

/** A name of the data schema as sent; the schema editor checks it and names the field (data-schema-changes.ts). */
const Name = t.String({ maxLength: 200 });
const Names = t.Array(Name, { minItems: 1, maxItems: 32 });
const OnDelete = t.UnionEnum(['no action', 'restrict', 'cascade', 'set null', 'set default']);
/** A column's default: a value (a literal cast to the column's type) or one of the known expressions. */
const ColumnDefault = t.Union([
  t.Object({ value: t.String({ maxLength: 4000 }) }),
  t.Object({ expression: t.UnionEnum(['now()', 'current_date', 'gen_random_uuid()', 'basalt.uid()']) }),
]);
const References = t.Object({ table: Name, column: t.Optional(Name), on_delete: t.Optional(OnDelete) });
const ColumnSpec = t.Object({
  name: Name,
  type: t.String({ maxLength: 100 }),
  not_null: t.Optional(t.Boolean()),
  unique: t.Optional(t.Boolean()),
  default: t.Optional(ColumnDefault),
  references: t.Optional(References),
});

export const Bodies = {
  /** A point-in-time restore at the next start (docs/backup.md): an ISO time with its zone, or 'latest'. */
  restoreTo: t.Object({ to: t.String({ minLength: 1, maxLength: 64 }) }),
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
  /** Lifting an administrator's sign-in lock. */
  unlock: t.Object({ email: t.String({ maxLength: 320 }) }),
  /** The fields as sent: the select's query builder names what is wrong. */
  select: t.Object({
    filters: t.Optional(t.Unknown()),
    sort: t.Optional(t.Unknown()),
    limit: t.Optional(t.Unknown()),
    offset: t.Optional(t.Unknown()),
    /** The Database API's `expand` (docs/database.md, "Relations"); each row then carries its `expand`. */
    expand: t.Optional(t.Record(t.String(), t.Unknown())),
  }),
  insertRow: t.Object({ data: Data }),
  updateRow: t.Object({ key: Data, data: Data }),
  deleteRows: t.Object({ keys: t.Array(Data, { minItems: 1, maxItems: 1000 }) }),
  importCsv: t.Object({ csv: t.String({ minLength: 1 }) }),
  /** Grants, row-level security, policies, realtime (docs/database.md), applied in one transaction. */
  access: t.Object({
    changes: t.Array(
      t.Union([
        t.Object({ op: t.Union([t.Literal('rls'), t.Literal('realtime')]), enabled: t.Boolean() }),
        t.Object({
          op: t.Union([t.Literal('grant'), t.Literal('revoke')]),
          role: Role,
          privilege: Privilege,
          /** Column grants (SELECT, INSERT, UPDATE); absent: the whole table. */
          columns: t.Optional(t.Array(t.String({ minLength: 1, maxLength: 63 }), { minItems: 1, maxItems: 200 })),
        }),
        t.Object({
          op: t.Literal('create_policy'),
          name: PolicyName,
          command: t.Union([t.Literal('ALL'), ...Privilege.anyOf]),
          roles: t.Array(Role, { minItems: 1, maxItems: 2 }),
          permissive: t.Optional(t.Boolean()),
          using: t.Optional(t.Union([t.String({ maxLength: 4000 }), t.Null()])),
          with_check: t.Optional(t.Union([t.String({ maxLength: 4000 }), t.Null()])),
        }),
        t.Object({ op: t.Literal('drop_policy'), name: PolicyName }),
      ]),
      { minItems: 1, maxItems: 50 },
    ),
  }),
  /** Schema changes (docs/admin-api.md, "Schema editor"), applied in one transaction as one migration file. */
  schema: t.Object({
    changes: t.Array(
      t.Union([
        t.Object({
          op: t.Literal('create_table'),
          table: Name,
          /** The primary key `id`: `bigint generated always as identity` (the default) or `uuid default gen_random_uuid()`. */
          primary_key: t.Optional(t.UnionEnum(['identity', 'uuid'])),
          columns: t.Array(ColumnSpec, { maxItems: 100 }),
          /** An `owner` column (basalt.uid()), row-level security and the own-rows policy for basalt_user. */
          owned: t.Optional(t.Boolean()),
        }),
        t.Object({ op: t.Literal('add_column'), table: Name, column: ColumnSpec }),
        t.Object({ op: t.Literal('rename_column'), table: Name, column: Name, to: Name }),
        t.Object({ op: t.Literal('drop_column'), table: Name, column: Name }),
        t.Object({
          op: t.Literal('alter_column'),
          table: Name,
          column: Name,
          type: t.Optional(t.String({ maxLength: 100 })),
          not_null: t.Optional(t.Boolean()),
          /** null: drop the default. */
          default: t.Optional(t.Nullable(ColumnDefault)),
        }),
        t.Object({ op: t.Literal('add_unique'), table: Name, columns: Names, name: t.Optional(Name) }),
        t.Object({
          op: t.Literal('add_check'),
          table: Name,
          expression: t.String({ minLength: 1, maxLength: 4000 }),
          name: t.Optional(Name),
        }),
        t.Object({
          op: t.Literal('add_foreign_key'),
          table: Name,
          columns: Names,
          references: t.Object({ table: Name, columns: t.Optional(Names) }),
          on_delete: t.Optional(OnDelete),
          name: t.Optional(Name),
        }),
        t.Object({ op: t.Literal('drop_constraint'), table: Name, name: Name }),
        t.Object({
          op: t.Literal('add_index'),
          table: Name,
          columns: Names,
          unique: t.Optional(t.Boolean()),
          name: t.Optional(Name),
        }),
        t.Object({ op: t.Literal('drop_index'), table: Name, name: Name }),
      ]),
      { minItems: 1, maxItems: 50 },
    ),
  }),
  /** A select as a site user (`user_id`) or anon (null or absent), read-only. */
  tryAs: t.Object({
    user_id: t.Optional(t.Union([t.String(), t.Null()])),
    filters: t.Optional(t.Unknown()),
    sort: t.Optional(t.Unknown()),
    limit: t.Optional(t.Unknown()),
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
  extensionJobs: t.Object({
    extension: t.Optional(t.String({ maxLength: 40 })),
    name: t.Optional(t.String({ maxLength: 100 })),
    state: t.Optional(t.String()),
    limit: Limit,
  }),
  /** The request log's filters (docs/logs.md); `before`: the last id of the previous page. */
  logs: t.Object({
    since: When,
    until: When,
    /** A status class (`2xx`…) or `error` (400 and above); a string with a pattern: a union enum would default a missing one to its first value. */
    status: t.Optional(t.String({ pattern: '^(|[1-5]xx|error)$' })),
    area: t.Optional(t.String({ maxLength: 40 })),
    path: t.Optional(t.String({ maxLength: 2000 })),
    key: t.Optional(t.String({ maxLength: 320 })),
    user: t.Optional(t.String({ maxLength: 320 })),
    limit: Limit,
    before: t.Optional(t.String({ pattern: '^[0-9]{1,19}$' })),
  }),
  users: t.Object({
    search: t.Optional(t.String({ maxLength: 320 })),
    limit: Limit,
    offset: t.Optional(t.Numeric({ minimum: 0, maximum: 1_000_000 })),
  }),
};
