/**
 * What the admin API answers (docs/admin-api.md), as schemas: each route declares its
 * success body with `reply(…)`, so Elysia checks the handler's return type against it
 * (and sends only the fields declared), and the panel's client takes its types from the
 * same objects (`AdminData<'name'>` in src/admin-ui/api.ts): a renamed field fails `tsc`
 * on both sides. Request bodies are typed the same way from `Bodies` (./model.ts). The
 * admin area is not in the public OpenAPI document.
 */
import { t, type Static, type TSchema } from 'elysia';
import { AREA } from '../../http/areas';
import { successOf } from '../../http/envelope-schemas';
import { SignInResponses } from '../auth/sign-in-model';

/** A moment: a Date on the server, an ISO 8601 string in JSON (the panel reads `Wire<…>`). */
const When = t.Date();
const MaybeWhen = t.Nullable(t.Date());
const MaybeText = t.Nullable(t.String());

const ok = successOf(AREA.admin);
/** A route's `response`: its success body around `data`, in the admin area's envelope. */
export const reply = <T extends TSchema>(data: T) => ({ 200: ok(data) });
/** The same for a route that answers 201 Created. */
export const replyCreated = <T extends TSchema>(data: T) => ({ 201: ok(data) });

const Admin = t.Object({ id: t.String(), email: t.String(), created_at: When, last_login_at: MaybeWhen });

const Key = t.Object({
  id: t.String(),
  type: t.Union([t.Literal('public'), t.Literal('service')]),
  name: MaybeText,
  service: MaybeText,
  permissions: t.Array(t.String()),
  tables: t.Array(t.String()),
  prefix: t.String(),
  last4: t.String(),
  display: t.String(),
  status: t.Union([t.Literal('active'), t.Literal('revoked'), t.Literal('expired')]),
  site: t.Boolean(),
  created_at: When,
  expires_at: MaybeWhen,
  revoked_at: MaybeWhen,
  last_used_at: MaybeWhen,
});

const User = t.Object({
  id: t.String(),
  email: t.String(),
  email_verified_at: MaybeWhen,
  disabled_at: MaybeWhen,
  created_at: When,
  last_login_at: MaybeWhen,
  locked_until: MaybeWhen,
});

const UserSession = t.Object({
  id: t.String(),
  created_at: When,
  last_used_at: When,
  expires_at: When,
  ip: MaybeText,
  user_agent: MaybeText,
});

/** A sign-in lock (auth/lockout.ts): the account's backstop, and the addresses failing on their own. */
const Lock = t.Object({
  locked_until: MaybeWhen,
  failures: t.Number(),
  sources: t.Array(t.Object({ ip: t.String(), failures: t.Number(), window_start: When, locked_until: MaybeWhen })),
});

const AuditEntry = t.Object({
  id: t.String(),
  at: When,
  admin_id: MaybeText,
  admin_email: MaybeText,
  ip: MaybeText,
  user_agent: MaybeText,
  action: t.String(),
  target: MaybeText,
  diff: t.Unknown(),
  request_id: MaybeText,
  actor: t.Union([t.Literal('admin'), t.Literal('cli')]),
  os_user: MaybeText,
  target_label: MaybeText,
});

const Setting = t.Object({
  key: t.String(),
  group: t.String(),
  value: t.Unknown(),
  default: t.Unknown(),
  source: t.Union([t.Literal('default'), t.Literal('database'), t.Literal('file'), t.Literal('environment')]),
  pinned_by: MaybeText,
  operator_only: MaybeText,
  live: t.Boolean(),
  type: t.UnionEnum(['string', 'int', 'bool', 'enum', 'list', 'json']),
  values: t.Optional(t.Array(t.String())),
  min: t.Optional(t.Number()),
  max: t.Optional(t.Number()),
  description: t.String(),
  secret: t.Boolean(),
  is_set: t.Boolean(),
});

const JobState = t.UnionEnum(['queued', 'sending', 'sent', 'failed', 'dead', 'cancelled']);

const Job = t.Object({
  id: t.String(),
  state: JobState,
  to: t.Array(t.String()),
  subject: t.String(),
  template: MaybeText,
  attempts: t.Number(),
  max_attempts: t.Number(),
  created_at: When,
  updated_at: When,
  next_attempt_at: MaybeWhen,
  sent_at: MaybeWhen,
  last_error: MaybeText,
  /** Earlier rounds of attempts, oldest first, one per retry: kept, never erased. */
  history: t.Array(t.Object({ until: t.String(), state: JobState, attempts: t.Number(), last_error: MaybeText })),
  message_id: t.String(),
  idempotency_key: MaybeText,
});

const TemplateSummary = t.Object({ name: t.String(), subject: t.String(), updated_at: MaybeWhen });
const Variables = {
  variables: t.Array(t.String()),
  /** Read only inside {% if %} / {% unless %}: a send (and the preview) may leave them out. */
  optional_variables: t.Array(t.String()),
};
const Template = t.Object({
  ...TemplateSummary.properties,
  html: MaybeText,
  text: MaybeText,
  ...Variables,
});

const Dashboard = t.Object({
  version: t.String(),
  engine: t.Union([t.Literal('embedded'), t.Literal('external')]),
  database: t.Object({ ok: t.Boolean(), latency_ms: t.Nullable(t.Number()) }),
  /** Jobs created in the last 24 hours, by state (every state, 0 when none). */
  mail: t.Object({ configured: t.Boolean(), jobs_24h: t.Record(t.String(), t.Number()) }),
  counts: t.Object({ users: t.Number(), keys_active: t.Number(), admins: t.Number() }),
  instances: t.Array(
    t.Object({
      id: t.String(),
      host: t.String(),
      pid: t.Number(),
      version: t.String(),
      started_at: When,
      seen_at: When,
    }),
  ),
  extensions: t.Object({
    loaded: t.Number(),
    failed: t.Array(t.Object({ name: t.String(), error: MaybeText })),
  }),
  /** This instance's realtime streams (docs/realtime.md): open now, events sent per second over the last 10 s. */
  realtime: t.Object({ connections: t.Number(), events_per_second: t.Number() }),
  recent_audit: t.Array(AuditEntry),
});

const ExtensionSetting = t.Object({
  key: t.String(),
  /** null for a secret: never shown. */
  value: t.Unknown(),
  source: t.Union([t.Literal('environment'), t.Literal('file'), t.Literal('database'), t.Literal('default')]),
  pinned_by: MaybeText,
  secret: t.Boolean(),
  description: t.String(),
});
const Extension = t.Object({
  name: t.String(),
  version: MaybeText,
  description: MaybeText,
  state: t.Union([t.Literal('loaded'), t.Literal('failed')]),
  error: MaybeText,
  routes: t.Array(t.Object({ method: t.String(), path: t.String() })),
  settings: t.Array(ExtensionSetting),
});

const Backup = t.Object({
  name: t.String(),
  size: t.Number(),
  created_at: t.String(),
  trigger: t.Nullable(t.Union([t.Literal('cli'), t.Literal('schedule'), t.Literal('admin')])),
  platform_version: MaybeText,
});
const CreatedBackup = t.Object({
  ...Backup.properties,
  files: t.Number(),
  /** Bytes before compression. */
  bytes: t.Number(),
  held_ms: t.Number(),
  total_ms: t.Number(),
  /** The off-machine copy when the Files module uses S3 (docs/backup.md). */
  s3: t.Nullable(t.Object({ bucket: t.String(), key: MaybeText, error: t.Optional(t.String()) })),
});

const Row = t.Record(t.String(), t.Unknown());
const Column = t.Object({
  name: t.String(),
  type: t.String(),
  nullable: t.Boolean(),
  has_default: t.Boolean(),
  references: t.Nullable(t.Object({ table: t.String(), column: t.String() })),
});
const Table = t.Object({
  name: t.String(),
  /** Exact when the table is small; null above (then `estimated_rows`). */
  rows: t.Nullable(t.Number()),
  estimated_rows: t.Number(),
  primary_key: t.Array(t.String()),
  columns: t.Array(Column),
  /** Its relations by their `expand` names: `columns` of this table pair with `target_columns` of `table`. */
  relations: t.Array(
    t.Object({
      name: t.String(),
      kind: t.UnionEnum(['many_to_one', 'one_to_many']),
      table: t.String(),
      columns: t.Array(t.String()),
      target_columns: t.Array(t.String()),
    }),
  ),
});

/** An extension's job (docs/admin-api.md, "Jobs"): a job, a cron run, or a hook's parked event. */
const ExtensionJob = t.Object({
  id: t.String(),
  extension: t.String(),
  name: t.String(),
  kind: t.UnionEnum(['job', 'cron', 'hook']),
  state: t.UnionEnum(['queued', 'running', 'succeeded', 'dead', 'cancelled']),
  payload: t.Unknown(),
  idempotency_key: MaybeText,
  attempts: t.Number(),
  max_attempts: t.Number(),
  run_at: When,
  /** Every failed attempt, oldest first. */
  errors: t.Array(t.Object({ attempt: t.Number(), at: t.String(), error: t.String() })),
  created_at: When,
  updated_at: When,
  finished_at: MaybeWhen,
});

const CronEntry = t.Object({
  extension: t.String(),
  name: t.String(),
  expression: t.String(),
  timezone: t.String(),
  last_slot: When,
  next_slot: MaybeText,
  last_job: MaybeText,
  last_state: MaybeText,
});

const HookEntry = t.Object({
  extension: t.String(),
  name: t.String(),
  /** `table:<schema>.<table>` or `event:<type>`. */
  source: t.String(),
  position: t.String(),
  lag_events: t.Number(),
  lag_seconds: t.Number(),
  claimed_by: MaybeText,
  updated_at: When,
});

/** The schema editor (docs/admin-api.md, "Schema editor"). */
const SchemaWarning = t.Object({
  change: t.Number(),
  code: t.UnionEnum([
    'table_rewrite',
    'dependent_views',
    'dependent_policies',
    'dependent_indexes',
    'dependent_foreign_keys',
    'api_keys',
    'realtime',
    'hooks',
    'data_refused',
  ]),
  message: t.String(),
  count: t.Optional(t.Number()),
});
const SchemaPreview = t.Object({ statements: t.Array(t.String()), warnings: t.Array(SchemaWarning) });
const TablePolicy = t.Object({
  name: t.String(),
  command: t.UnionEnum(['ALL', 'SELECT', 'INSERT', 'UPDATE', 'DELETE']),
  permissive: t.Boolean(),
  roles: t.Array(t.String()),
  using: MaybeText,
  with_check: MaybeText,
});
const TableStructure = t.Object({
  table: t.String(),
  rls: t.Boolean(),
  columns: t.Array(
    t.Object({
      name: t.String(),
      type: t.String(),
      not_null: t.Boolean(),
      default: MaybeText,
      identity: t.Nullable(t.UnionEnum(['always', 'by default'])),
    }),
  ),
  constraints: t.Array(
    t.Object({
      name: t.String(),
      type: t.UnionEnum(['primary_key', 'unique', 'foreign_key', 'check']),
      definition: t.String(),
    }),
  ),
  indexes: t.Array(t.Object({ name: t.String(), definition: t.String(), unique: t.Boolean(), constraint: MaybeText })),
  policies: t.Array(TablePolicy),
});

const Empty = t.Object({});

/** One answered request of the request log (docs/logs.md). */
const LogEntry = t.Object({
  id: t.String(),
  at: When,
  request_id: t.String(),
  method: t.String(),
  path: t.String(),
  status: t.Number(),
  duration_ms: t.Number(),
  area: t.String(),
  key_id: MaybeText,
  key_label: MaybeText,
  user_id: MaybeText,
  user_email: MaybeText,
  ip: MaybeText,
  /** An error answer: its code and message, and for a 5xx the cause the server's log recorded. */
  error: t.Nullable(
    t.Object({
      code: t.String(),
      message: t.String(),
      cause: t.Optional(t.Object({ name: t.Optional(t.String()), message: t.String(), stack: t.Optional(t.String()) })),
    }),
  ),
});

export const Responses = {
  empty: Empty,
  authState: t.Object({ setup_required: t.Boolean(), signed_in: t.Boolean() }),
  session: t.Object({ admin: Admin, csrf_token: t.String() }),
  admin: t.Object({ admin: Admin }),
  admins: t.Object({ admins: t.Array(t.Object({ ...Admin.properties, lock: Lock })) }),
  /** `cleared`: how many failure records were removed. */
  adminUnlocked: t.Object({ admin: Admin, cleared: t.Number() }),
  keys: t.Object({ keys: t.Array(Key) }),
  key: t.Object({ key: Key }),
  createdKey: t.Object({ key: Key, secret: t.String() }),
  users: t.Object({ users: t.Array(User), total: t.Number() }),
  user: t.Object({ user: User }),
  userDetail: t.Object({ user: User, sessions: t.Array(UserSession), lock: Lock, verification_mail: MaybeText }),
  audit: t.Object({ entries: t.Array(AuditEntry), next_cursor: MaybeText }),
  logs: t.Object({ entries: t.Array(LogEntry), next_cursor: MaybeText }),
  /** One request id's rows, and the administrators' changes made in it (basalt.admin_audit). */
  logDetail: t.Object({
    entries: t.Array(LogEntry),
    audit: t.Array(
      t.Object({ id: t.String(), at: When, action: t.String(), target: MaybeText, admin_email: MaybeText }),
    ),
  }),
  /**
   * Requests and errors per minute: `requests` counts each kept row for the requests it stands
   * for (sampled successes: docs/logs.md), `kept` the rows themselves.
   */
  logMinutes: t.Object({
    minutes: t.Array(t.Object({ minute: When, requests: t.Number(), errors: t.Number(), kept: t.Number() })),
    sample_rate: t.Number(),
    max_per_second: t.Number(),
  }),
  settings: t.Object({ settings: t.Array(Setting) }),
  smtpTest: t.Object({ message_id: t.String(), response: t.String() }),
  jobs: t.Object({ jobs: t.Array(Job), next_cursor: MaybeText }),
  extensionJobs: t.Object({ jobs: t.Array(ExtensionJob) }),
  extensionJob: t.Object({ job: ExtensionJob }),
  jobSchedules: t.Object({ cron: t.Array(CronEntry), hooks: t.Array(HookEntry) }),
  dashboard: Dashboard,
  tables: t.Object({ tables: t.Array(Table) }),
  structure: TableStructure,
  schemaPreview: SchemaPreview,
  schemaApplied: t.Object({
    ...SchemaPreview.properties,
    migration: t.Object({ file: t.String(), statements: t.Array(t.String()) }),
  }),
  /** GET /data/types: TypeScript declarations for the JS client (docs/client.md, Types). */
  types: t.Object({ role: t.String(), types: t.String() }),
  /** `total`: exact, only for a table of at most 100,000 rows (estimated); `estimated_total` always. */
  rows: t.Object({ rows: t.Array(Row), count: t.Number(), estimated_total: t.Number(), total: t.Optional(t.Number()) }),
  row: t.Object({ row: Row }),
  deleted: t.Object({ count: t.Number() }),
  imported: t.Object({ inserted: t.Number() }),
  /** A user's ways to sign in: the same answer as Public Auth's GET /auth/sign-in-methods. */
  signInMethods: SignInResponses.methods.properties.data,
  providers: t.Object({ providers: t.Array(t.String()) }),
  providerCheck: t.Object({
    name: t.String(),
    kind: t.Union([t.Literal('oidc'), t.Literal('github')]),
    issuer: t.String(),
    ok: t.Boolean(),
    authorization_endpoint: MaybeText,
    authorization_url: MaybeText,
    /** The callback to register at the provider; null when no public base URL is known (the authorization_url step says so). */
    redirect_uri: MaybeText,
    problem: MaybeText,
    /** Each step of the check: discovery, signing keys, the authorization URL, the token endpoint (ok null: not tried). */
    checks: t.Array(
      t.Object({
        step: t.UnionEnum(['discovery', 'jwks', 'authorization_url', 'token_endpoint']),
        ok: t.Nullable(t.Boolean()),
        detail: t.String(),
      }),
    ),
  }),
  /** `dir`: where the archives are (`<data.dir>/backups`). */
  backups: t.Object({
    backups: t.Array(Backup),
    dir: t.String(),
    /** Point-in-time restore (docs/backup.md): the span it reaches, and a restore asked for the next start. */
    pitr: t.Object({
      window: t.Union([t.Object({ from: t.String(), to: t.String(), bases: t.Integer() }), t.Null()]),
      pending: t.Union([t.Object({ to: t.String(), requested_by: t.String(), requested_at: t.String() }), t.Null()]),
    }),
  }),
  restoreRequested: t.Object({ to: t.String(), requested_by: t.String(), requested_at: t.String() }),
  backup: t.Object({ backup: CreatedBackup }),
  /** `dir`: the absolute folder scanned at start (extensions.dir resolved), where a new one goes. */
  extensions: t.Object({ extensions: t.Array(Extension), dir: t.String() }),
  extensionSetting: t.Object({ setting: ExtensionSetting }),
  templates: t.Object({ templates: t.Array(TemplateSummary) }),
  template: t.Object({ template: Template }),
  preview: t.Object({ subject: t.String(), html: MaybeText, text: MaybeText, ...Variables }),
  templateTest: t.Object({ job_id: t.String(), message_id: t.String(), response: t.String() }),
  /** `smtp_server`: host:port of mail.smtp_url, beside the job's error. */
  job: t.Object({ job: Job, smtp_server: MaybeText }),
  setting: t.Object({ setting: Setting }),
};

/** The `data` of the admin API's answer `name`, as the server builds it (dates as Date). */
export type AdminAnswer<K extends keyof typeof Responses> = Static<(typeof Responses)[K]>;
