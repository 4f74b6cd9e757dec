/**
 * Every setting Basalt knows, in one list: its type, default, environment
 * variable and whether it needs a restart. Config file, environment, the
 * database-stored settings and `basalt settings set` are all validated here.
 *
 * Areas append their keys to this list; an unknown key anywhere is an error.
 */
import { type Static, Type as T, type TSchema } from '@sinclair/typebox';
import { isPlatformSchema } from './platform-schemas';

/** One sign-in provider of `auth.oauth_providers` (docs/auth.md, OAuth2 and OpenID Connect). */
export const OAUTH_PROVIDER = T.Object(
  {
    name: T.String({ pattern: '^[a-z0-9_-]{1,40}$' }),
    /** OpenID Connect issuer (discovery at <issuer>/.well-known/openid-configuration); GitHub: its web origin. */
    issuer: T.Optional(T.String({ minLength: 1, maxLength: 500 })),
    client_id: T.String({ minLength: 1, maxLength: 500 }),
    client_secret: T.String({ maxLength: 2000 }),
    scopes: T.Optional(T.Array(T.String({ minLength: 1, maxLength: 200 }), { maxItems: 50 })),
    /** oidc (default) or github (plain OAuth2; the e-mail from its API). */
    kind: T.Optional(T.Union([T.Literal('oidc'), T.Literal('github')])),
    /** kind github: the API's base URL (default https://api.github.com; GitHub Enterprise or a test server). */
    api_url: T.Optional(T.String({ minLength: 1, maxLength: 500 })),
  },
  { additionalProperties: false },
);
const OAUTH_PROVIDERS = T.Array(OAUTH_PROVIDER, { maxItems: 50 });

export type SettingKind = 'string' | 'int' | 'bool' | 'enum' | 'list' | 'json';

export interface SettingDef {
  key: string;
  kind: SettingKind;
  default: unknown;
  /** Environment variables, first wins. Default: BASALT_ + key upper-cased with '.' → '_'. */
  env?: readonly string[];
  /** Listener ports, host, database URL, data dir: read once at start. */
  restart?: boolean;
  /** Never shown in full by `settings get`, the admin panel or logs. */
  secret?: boolean;
  min?: number;
  max?: number;
  values?: readonly string[];
  /** kind 'string': the value must match this regular expression; `expects` says what in words. */
  pattern?: string;
  expects?: string;
  /** kind 'json': the shape of the value (a structured value such as a list of objects). */
  schema?: TSchema;
  /**
   * A value the type allows but that would stop the next start or do harm: what is wrong
   * with it, in words (e.g. a platform schema as the data schema), or undefined when fine.
   */
  refuse?(value: unknown): string | undefined;
  /**
   * Changed only by whoever runs the process (environment, config file, `basalt settings
   * set`), never from the admin API; the text says why (code loaded from a path, exposure).
   */
  operatorOnly?: string;
  description: string;
}

const port = <K extends string>(key: K, def: number, description: string) =>
  ({
    key,
    kind: 'int',
    default: def,
    min: 0,
    max: 65535,
    restart: true,
    description,
  }) as const satisfies SettingDef;

/** The shortest `backup.schedule` interval (docs/backup.md). */
export const BACKUP_MIN_INTERVAL_SECONDS = 300;

const DEFINITIONS = [
  // web — listeners and HTTP
  port('web.port', 5000, 'Main listener port (admin panel, mail, files, health).'),
  port('web.public_port', 5001, 'Public listener port when web.public_api_separate is true.'),
  {
    key: 'web.public_api_separate',
    kind: 'bool',
    default: false,
    restart: true,
    description: 'Serve the public API on its own listener (web.public_port).',
  },
  {
    key: 'web.public_api_access_mode',
    kind: 'enum',
    values: ['open', 'api_key_required'],
    default: 'open',
    description: 'open: public routes need no key; api_key_required: every public prefix needs X-API-Key.',
  },
  {
    key: 'web.site_public_key',
    kind: 'string',
    default: '',
    // The shape of a public key (src/modules/keys/key-material.ts): a service key's secret is never stored here.
    pattern: '^(pk_[A-Za-z0-9_-]{43})?$',
    expects: 'a public key (pk_ and 43 characters) or empty; never a service key',
    description:
      'The site public key (pk_…) front-ends use; shown in runtime config in api_key_required mode only while it is an active public key. Public by design; set by `basalt keys create --type public --site`.',
  },
  {
    key: 'web.host',
    kind: 'string',
    default: '127.0.0.1',
    restart: true,
    operatorOnly: 'it decides which networks reach both listeners',
    description: 'Address both listeners bind to.',
  },
  {
    key: 'web.cors_origins',
    kind: 'list',
    default: [],
    description: 'Origins allowed by CORS, exact match (e.g. https://app.example.com). Empty: no CORS headers.',
  },
  {
    key: 'web.trusted_proxies',
    kind: 'list',
    default: [],
    description:
      'Peer addresses or CIDR blocks (10.0.0.0/8, fd00::/8) whose X-Forwarded-For is believed for the client IP.',
  },
  {
    key: 'web.metrics_access',
    kind: 'enum',
    values: ['loopback', 'open', 'off'],
    default: 'loopback',
    operatorOnly: 'it decides who outside this machine reads the metrics',
    description:
      'Who may read /metrics: loopback (clients on this machine, e.g. a local Prometheus agent; the client IP as web.trusted_proxies resolves it), open (anyone who reaches the main listener; firewall it), off (404).',
  },
  {
    key: 'web.max_json_body_bytes',
    kind: 'int',
    default: 1_048_576,
    min: 1024,
    max: 104_857_600,
    description:
      'Largest request body outside Files uploads (JSON anywhere, forms and other bodies on extension routes); larger → 413. Files uploads are limited by files.max_bytes.',
  },
  {
    key: 'web.max_json_depth',
    kind: 'int',
    default: 64,
    min: 1,
    max: 1000,
    description:
      'Deepest nesting of arrays and objects in a JSON request body; deeper → 400 invalid_json, checked before the body is parsed.',
  },
  {
    key: 'web.max_json_items',
    kind: 'int',
    default: 10_000,
    min: 1,
    max: 1_000_000,
    description:
      'Most elements in one array, or members in one object, of a JSON request body; more → 400 invalid_json, checked before the body is parsed.',
  },
  {
    key: 'web.main_base_url',
    kind: 'string',
    default: '',
    description:
      "Base URL of the main listener (mail, files) as clients see it, published in runtime config when web.public_api_separate is true. Empty: the request's host with web.port.",
  },
  {
    key: 'web.shutdown_timeout_ms',
    kind: 'int',
    default: 10_000,
    min: 100,
    max: 600_000,
    description:
      'On SIGTERM/SIGINT, how long in-flight requests may take to finish before they are cut (and again for the shutdown steps); the process then exits.',
  },
  {
    key: 'web.takeover_wait_ms',
    kind: 'int',
    default: 30_000,
    min: 1000,
    max: 600_000,
    description:
      'While a new `basalt serve` takes over this one (docs/operations.md, "Upgrading"), how long a request arriving in the gap waits for the new process before it is answered 503 restarting with Retry-After.',
  },
  {
    key: 'web.public_base_url',
    kind: 'string',
    default: '',
    description:
      'Public base URL of the API as clients see it (used in links and runtime config). Empty: derived from the request.',
  },
  // storage
  {
    key: 'database.url',
    kind: 'string',
    default: '',
    env: ['BASALT_DATABASE_URL', 'DATABASE_URL'],
    restart: true,
    secret: true,
    description: 'External PostgreSQL URL; empty → embedded engine in <data.dir>/pg.',
  },
  {
    key: 'database.user_url',
    kind: 'string',
    default: '',
    env: ['BASALT_DATABASE_USER_URL'],
    restart: true,
    secret: true,
    operatorOnly: "it decides which database role users' statements log in as",
    description:
      'External PostgreSQL: the URL users\' and anonymous Database API statements connect with, logging in as a NOINHERIT role that is a member of basalt_user and basalt_anon only. Empty: Basalt creates and keeps such a role itself, basalt_auth_<database> (the platform role needs CREATEROLE). See docs/database.md, "The platform\'s role on a managed server".',
  },
  {
    key: 'database.pooler',
    kind: 'enum',
    values: ['none', 'transaction'],
    default: 'none',
    restart: true,
    operatorOnly: 'it must say what database.url really reaches',
    description:
      'External PostgreSQL: what database.url reaches. none: PostgreSQL itself, or a pooler in session mode. transaction: a transaction-mode pooler (PgBouncer pool_mode = transaction, Supavisor, Neon\'s pooled endpoint, RDS Proxy), where no server connection outlives a transaction: no prepared statement is kept across transactions, settings are set per transaction, and LISTEN and migrations go through database.direct_url (without it notifications are polled every second). See docs/operations.md, "Scaling out".',
  },
  {
    key: 'database.direct_url',
    kind: 'string',
    default: '',
    env: ['BASALT_DATABASE_DIRECT_URL'],
    restart: true,
    secret: true,
    operatorOnly: "it decides which server and role the platform's sessions log in as",
    description:
      'External PostgreSQL behind a transaction-mode pooler (database.pooler = transaction): a URL of the same database that bypasses the pooler, for what needs a session of its own: LISTEN (realtime, settings, sessions and keys invalidation, mail wake-ups; one connection per instance) and migrations. Empty: those go through the pooler, and notifications are polled every second instead.',
  },
  {
    key: 'database.pool_max',
    kind: 'int',
    default: 20,
    min: 1,
    max: 500,
    restart: true,
    description:
      "Connections in use at once in each of the three external pools (the Database API's for service keys, its authenticator's for users and anon, the platform's); each pool's single-statement batches (the Database API outside transactions, keyed mail acceptance) have connections of their own, so up to 6 × this per instance may stay open (docs/database.md, External pool).",
  },
  {
    key: 'database.busy_timeout_ms',
    kind: 'int',
    default: 2000,
    min: 100,
    max: 60_000,
    description:
      'Longest wait for the database (the embedded session, a pooled connection); past it the request answers 503 database_busy with Retry-After. Idle API transactions are asked to yield within it (docs/database.md, "Waiting for the database").',
  },
  {
    key: 'database.embedded_sync',
    kind: 'enum',
    values: ['full', 'normal', 'off'],
    default: 'full',
    restart: true,
    description:
      'Embedded engine: when commits reach the disk. full: synced before a commit is acknowledged; normal: synced within 0.2 s (an OS crash or power loss can lose the last commits, never the cluster); off: never synced (an OS crash can lose or break the cluster; tests only). See docs/operations.md, Durability.',
  },
  {
    key: 'database.data_schema',
    kind: 'string',
    default: 'public',
    restart: true,
    refuse: (v: string) =>
      isPlatformSchema(v)
        ? `'${v}' is a platform schema (basalt, ext_*, information_schema, pg_*); application tables belong in their own schema (default public)`
        : undefined,
    description: 'Schema holding application tables (Database API, operator migrations).',
  },
  {
    key: 'data.dir',
    kind: 'string',
    default: './basalt_data',
    restart: true,
    description: 'Embedded database, local file storage.',
  },
  {
    key: 'migrations.dir',
    kind: 'string',
    default: './migrations',
    restart: true,
    operatorOnly: 'the SQL files in it run at the next start',
    description: 'Operator SQL migrations, applied in name order at start.',
  },
  {
    key: 'extensions.dir',
    kind: 'string',
    default: './extensions',
    restart: true,
    operatorOnly: 'the code in it is loaded at the next start',
    description:
      "Directory scanned for extensions at start. A relative path is taken from the executable's directory when running the compiled basalt, and from the working directory when running from a checkout; an absolute path is used as is.",
  },
  {
    key: 'extensions.setup_timeout_ms',
    kind: 'int',
    default: 30_000,
    min: 100,
    max: 600_000,
    restart: true,
    description:
      'An extension whose setup has not finished after this long is marked failed (start-up never hangs on one).',
  },
  {
    key: 'log.level',
    kind: 'enum',
    values: ['debug', 'info', 'warn', 'error', 'silent'],
    default: 'info',
    description: 'Structured log verbosity.',
  },
  // the request log (docs/logs.md)
  {
    key: 'logs.enabled',
    kind: 'bool',
    default: true,
    description:
      "Keep a row per answered request in the database (basalt.request_log: the panel's Logs screen, basalt logs). Off: only the JSON log on stdout.",
  },
  {
    key: 'logs.sample_rate',
    kind: 'string',
    default: '1',
    pattern: '^(0(\\.[0-9]{1,6})?|1(\\.0{1,6})?|\\.[0-9]{1,6})$',
    expects: 'a number from 0 to 1, e.g. 0.1',
    description:
      'Share of successful requests (status below 400) kept in the request log, from 0 to 1; answers with status 400 and above are always kept.',
  },
  {
    key: 'logs.max_per_second',
    kind: 'int',
    default: 50,
    min: 0,
    max: 1_000_000,
    description:
      'About how many successful requests a second each instance keeps in the request log at most: past it, successes are sampled and each kept row counts for those it stands for; errors are always kept. 0: no limit.',
  },
  {
    key: 'logs.retention_days',
    kind: 'int',
    default: 7,
    min: 1,
    max: 3650,
    description: 'Request log rows older than this are deleted (in batches, at start and hourly).',
  },
  // runtime config (public)
  {
    key: 'app.name',
    kind: 'string',
    default: 'Basalt',
    description: 'Application name shown to front-ends (runtime config).',
  },
  // database API
  { key: 'db.max_limit', kind: 'int', default: 1000, min: 1, max: 100_000, description: 'Largest select limit.' },
  {
    key: 'db.max_response_bytes',
    kind: 'int',
    default: 32 * 1024 * 1024,
    min: 65_536,
    max: 1024 * 1024 * 1024,
    description:
      "Largest answer of one Database API request (a select's rows, a write's RETURNING) and of one admin data browser page; larger → 400 response_too_large (a select's rows dropped as they are read, a write refused by the database without effect). See docs/database.md, Answer size.",
  },
  {
    key: 'db.statement_timeout_ms',
    kind: 'int',
    default: 5000,
    min: 100,
    max: 600_000,
    description:
      'Statement timeout of Database API queries (→ 503 query_timeout); lock waits give up at half of it (→ 503 lock_timeout).',
  },
  {
    key: 'db.transaction_idle_timeout_ms',
    kind: 'int',
    default: 30_000,
    min: 1000,
    max: 3_600_000,
    description: 'Idle time after which an open API transaction is rolled back.',
  },
  {
    key: 'db.transaction_max_lifetime_ms',
    kind: 'int',
    default: 60_000,
    min: 1000,
    max: 3_600_000,
    description:
      'Longest life of an open API transaction however busy, from begin; then it is rolled back (409 transaction_aborted on its id).',
  },
  {
    key: 'db.max_transactions_per_key',
    kind: 'int',
    default: 10,
    min: 1,
    max: 1000,
    description: 'Open transactions one API key may hold, begins still waiting for the database included.',
  },
  {
    key: 'db.pool_share_per_key',
    kind: 'int',
    default: 50,
    min: 1,
    max: 100,
    description:
      'Percent of the Database API pool (external PostgreSQL, database.pool_max connections) one API key may hold at once; at least one connection.',
  },
  // realtime (docs/realtime.md)
  {
    key: 'realtime.retention_seconds',
    kind: 'int',
    default: 300,
    min: 10,
    max: 7 * 86_400,
    description:
      'How long change events are kept for resuming with Last-Event-ID; an older resume gets event: reset. Pruned in batches.',
  },
  {
    key: 'realtime.max_connections',
    kind: 'int',
    default: 2000,
    min: 1,
    max: 1_000_000,
    description: 'Realtime streams one instance serves at once (→ 429 too_many_connections beyond).',
  },
  {
    key: 'realtime.max_connections_per_user',
    kind: 'int',
    default: 20,
    min: 1,
    max: 100_000,
    description:
      'Realtime streams one site user (or the anonymous public, counted per client address) holds on one instance.',
  },
  {
    key: 'realtime.max_connections_per_key',
    kind: 'int',
    default: 200,
    min: 1,
    max: 100_000,
    description: 'Realtime streams one service key holds on one instance.',
  },
  {
    key: 'realtime.heartbeat_seconds',
    kind: 'int',
    default: 15,
    min: 1,
    max: 300,
    description:
      'Seconds between the comment lines (: keep-alive) every realtime stream gets, so proxies do not close an idle stream.',
  },
  {
    key: 'realtime.buffer_bytes',
    kind: 'int',
    default: 1024 * 1024,
    min: 16 * 1024,
    max: 256 * 1024 * 1024,
    description:
      'Bytes a stream may keep waiting for a slow client: over it for a second (or over four times it at once) and the stream is closed; the client resumes with Last-Event-ID.',
  },
  // public auth
  {
    key: 'auth.jwt_secret',
    kind: 'string',
    default: '',
    secret: true,
    restart: true,
    description: 'HS256 secret for access tokens; empty → generated once and kept in the database.',
  },
  { key: 'auth.registration_open', kind: 'bool', default: true, description: 'Allow self-registration.' },
  {
    key: 'auth.email_verification_required',
    kind: 'bool',
    default: false,
    description: 'Users must verify their e-mail before they can log in.',
  },
  {
    key: 'auth.password_min_length',
    kind: 'int',
    default: 8,
    min: 6,
    max: 1024,
    description: 'Minimum password length.',
  },
  {
    key: 'auth.rate_limit_login_per_ip',
    kind: 'int',
    default: 10,
    min: 1,
    max: 100_000,
    description: 'Login attempts per minute per client IP.',
  },
  {
    key: 'auth.rate_limit_login_per_account',
    kind: 'int',
    default: 5,
    min: 1,
    max: 100_000,
    description:
      'Login attempts and e-mail code verifies per minute per account from one client address; e-mail code requests per minute per address.',
  },
  {
    key: 'auth.rate_limit_register_per_ip',
    kind: 'int',
    default: 5,
    min: 1,
    max: 100_000,
    description: 'Registrations per minute per client IP.',
  },
  {
    key: 'auth.rate_limit_token_per_ip',
    kind: 'int',
    default: 10,
    min: 1,
    max: 100_000,
    description: 'Password-reset and e-mail-verification token submissions per minute per client IP.',
  },
  {
    key: 'auth.lockout_threshold',
    kind: 'int',
    default: 5,
    min: 1,
    max: 1000,
    description:
      'Failed sign-ins (passwords, second-factor codes) from one client address within the lockout window that lock that address out of the account; others still sign in.',
  },
  {
    key: 'auth.lockout_backstop_threshold',
    kind: 'int',
    default: 50,
    min: 1,
    max: 100_000,
    description:
      'Failed sign-ins to one site account from all addresses together, within auth.lockout_window_seconds, that lock the account for everyone; a password reset, or a new password set by an administrator, lifts it.',
  },
  {
    key: 'auth.lockout_window_seconds',
    kind: 'int',
    default: 900,
    min: 1,
    max: 86_400,
    description: 'Window counting failed logins, and lock duration.',
  },
  {
    key: 'auth.access_token_seconds',
    kind: 'int',
    default: 900,
    min: 10,
    max: 86_400,
    description:
      "Lifetime of a site user's access token (JWT), in seconds; tokens issued after a change take it. Short is cheap: clients refresh on their own (docs/auth.md, Tokens and sessions).",
  },
  {
    key: 'auth.refresh_token_seconds',
    kind: 'int',
    default: 2_592_000,
    min: 60,
    max: 31_536_000,
    description:
      'Lifetime of a refresh token and of an idle session, in seconds (30 days by default); each refresh gives the session as long again. Sessions started or refreshed after a change take it.',
  },
  {
    key: 'auth.refresh_reuse_interval_seconds',
    kind: 'int',
    default: 10,
    min: 0,
    max: 300,
    description:
      'Seconds after a refresh during which the spent refresh token, presented again, gets the same new refresh token (concurrent refreshes, a retry after a lost answer) instead of revoking the session as reuse; 0 turns this off.',
  },
  {
    key: 'auth.rate_limit_email_per_ip',
    kind: 'int',
    default: 5,
    min: 1,
    max: 100_000,
    description: 'Password-reset and verification e-mail requests per minute per client IP.',
  },
  {
    key: 'auth.password_reset_url',
    kind: 'string',
    default: '',
    description:
      'Front-end page that completes a password reset; the token is appended as ?token=. Empty: <web.public_base_url>/reset-password (or the request origin when it is loopback or in web.cors_origins; otherwise no mail).',
  },
  {
    key: 'auth.verify_email_url',
    kind: 'string',
    default: '',
    description:
      'Front-end page that confirms an e-mail address; the token is appended as ?token=. Empty: <web.public_base_url>/verify-email (or the request origin when it is loopback or in web.cors_origins; otherwise no mail).',
  },
  {
    key: 'auth.oauth_providers',
    kind: 'json',
    default: [],
    secret: true,
    schema: OAUTH_PROVIDERS,
    expects:
      'a list of {name, issuer, client_id, client_secret, scopes?, kind?, api_url?} (JSON in the environment); name: lower-case letters, digits, - and _',
    description:
      'Sign-in providers (docs/auth.md, OAuth2 and OpenID Connect): any OpenID Connect issuer, or the presets google and github (kind "github": plain OAuth2). Secret: holds the client secrets.',
  },
  {
    key: 'auth.redirect_allowlist',
    kind: 'list',
    default: [],
    description:
      'Where a provider sign-in may return (redirect_to): exact origins (https://app.example.com) or an origin with a path prefix (https://app.example.com/auth/). Empty: no provider sign-in.',
  },
  // mail
  {
    key: 'mail.smtp_url',
    kind: 'string',
    default: '',
    secret: true,
    description: 'SMTP server, e.g. smtp://user:pass@host:587; empty → mail not configured.',
  },
  { key: 'mail.from', kind: 'string', default: '', description: 'Sender address of outgoing mail.' },
  { key: 'mail.max_recipients', kind: 'int', default: 50, min: 1, max: 1000, description: 'Recipients per message.' },
  {
    key: 'mail.max_attempts',
    kind: 'int',
    default: 8,
    min: 1,
    max: 100,
    description: 'Delivery attempts before a job is dead.',
  },
  {
    key: 'mail.retry_base_ms',
    kind: 'int',
    default: 2000,
    min: 10,
    max: 3_600_000,
    description: 'First retry delay; doubles each attempt, with jitter.',
  },
  {
    key: 'mail.concurrency',
    kind: 'int',
    default: 4,
    min: 1,
    max: 100,
    description: 'Mail jobs sent at once by one instance.',
  },
  {
    key: 'mail.lease_ms',
    kind: 'int',
    default: 10_000,
    min: 1000,
    max: 3_600_000,
    description:
      'How long a claimed mail job stays with its instance without a renewal (renewed every third of it); a job whose instance died is reclaimed after this.',
  },
  {
    key: 'mail.job_retention_days',
    kind: 'int',
    default: 7,
    min: 1,
    max: 3650,
    description: 'Sent and dead mail jobs older than this are purged (hourly).',
  },
  // jobs, cron and hooks of extensions (docs/extensions.md)
  {
    key: 'jobs.lease_ms',
    kind: 'int',
    default: 10_000,
    min: 1000,
    max: 3_600_000,
    description:
      "How long a running job or a hook's delivery stays with its instance without a renewal (renewed every third of it); after an instance dies, its work moves to another after this.",
  },
  {
    key: 'jobs.retention_days',
    kind: 'int',
    default: 7,
    min: 1,
    max: 3650,
    description:
      "Extensions' jobs that ended (succeeded, dead, cancelled) longer ago than this are purged hourly, with their cron slot records.",
  },
  // files module
  {
    key: 'files.max_bytes',
    kind: 'int',
    default: 25 * 1024 * 1024,
    min: 1,
    max: 10 * 1024 * 1024 * 1024,
    description: 'Largest upload (media-library).',
  },
  // administration (docs/admin.md)
  {
    key: 'admin.session_idle_minutes',
    kind: 'int',
    default: 120,
    min: 1,
    max: 10_080,
    description: 'An administrator session unused for this long ends (minutes).',
  },
  {
    key: 'admin.session_max_hours',
    kind: 'int',
    default: 12,
    min: 1,
    max: 720,
    description: 'An administrator session ends this long after sign-in, however active (hours).',
  },
  {
    key: 'admin.lockout_backstop_threshold',
    kind: 'int',
    default: 50,
    min: 1,
    max: 100_000,
    description:
      'Failed administrator sign-ins from all addresses together, within auth.lockout_window_seconds, that lock the account for everyone (each address is locked on its own after auth.lockout_threshold); basalt admin unlock lifts it.',
  },
  {
    key: 'admin.audit_retention_days',
    kind: 'int',
    default: 90,
    min: 1,
    max: 36_500,
    description: 'Audit log entries older than this are deleted (in batches, hourly).',
  },
  // backups of the embedded engine (docs/backup.md)
  {
    key: 'backup.schedule',
    kind: 'string',
    default: 'off',
    pattern: '^(|off|every [1-9][0-9]{0,5}[smhd]|daily ([01][0-9]|2[0-3]):[0-5][0-9])$',
    expects: "'off', 'every N' with a unit s, m, h or d (every 6h), or 'daily HH:MM' in UTC (daily 03:00)",
    // A backup holds the embedded database while it copies: back to back, nothing else runs.
    refuse: (v: string) => {
      const m = /^every (\d+)([smhd])$/.exec(v.trim());
      const seconds = m ? Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86_400 }[m[2] as 's' | 'm' | 'h' | 'd'] : Infinity;
      return seconds < BACKUP_MIN_INTERVAL_SECONDS
        ? `'${v}' is more often than every ${BACKUP_MIN_INTERVAL_SECONDS / 60} minutes (each backup holds the embedded database while it copies)`
        : undefined;
    },
    description:
      'When serve makes a backup into <data.dir>/backups (embedded engine): off, every N{s,m,h,d} (every 6h), or daily HH:MM (UTC).',
  },
  {
    key: 'backup.keep',
    kind: 'int',
    default: 7,
    min: 1,
    max: 10_000,
    description:
      'Scheduled backups kept; older scheduled ones are deleted after each scheduled backup (backups made by hand are kept).',
  },
  {
    key: 'backup.s3_url',
    kind: 'string',
    default: '',
    secret: true,
    pattern: '^(|s3://.+)$',
    expects: 's3://[KEY:SECRET@]bucket[/prefix][?endpoint=URL&region=R], or empty',
    description:
      'Where every backup is also uploaded, checked by its SHA-256 (docs/backup.md, "Backups in S3"); retention applies there too. Credentials in the URL or in S3_ACCESS_KEY_ID / S3_SECRET_ACCESS_KEY. Empty: the Files module\'s bucket when it stores uploads in S3, else none.',
  },
  {
    key: 'backup.pitr_days',
    kind: 'int',
    default: 7,
    min: 0,
    max: 3650,
    description:
      'Days of WAL kept in <data.dir>/backups/wal for point-in-time restore (docs/backup.md, "Point-in-time restore"), counted back to the base backup they start from; 0 turns WAL archiving off.',
  },
  {
    key: 'backup.wal_flush_seconds',
    kind: 'int',
    default: 60,
    min: 1,
    max: 3600,
    description:
      'At most this many seconds of committed changes are missing from the WAL archive: the segment being written is copied (as .partial) this often, completed segments at once.',
  },
] as const satisfies readonly SettingDef[];

type Def = (typeof DEFINITIONS)[number];

/** Every setting's key: `settings.get` takes only these. */
export type SettingKey = Def['key'];

/** The value type a definition's kind declares (a json setting: its TypeBox schema's static type). */
type ValueOf<D> = D extends { kind: 'int' }
  ? number
  : D extends { kind: 'bool' }
    ? boolean
    : D extends { kind: 'string' }
      ? string
      : D extends { kind: 'list' }
        ? string[]
        : D extends { kind: 'enum'; values: readonly (infer V)[] }
          ? V
          : D extends { kind: 'json'; schema: infer S extends TSchema }
            ? Static<S>
            : unknown;

/** The type of setting `K`'s value, as its definition in SETTINGS declares it. */
export type SettingValue<K extends SettingKey> = ValueOf<Extract<Def, { key: K }>>;

/** The part after `<prefix>.` of every key in that section: `SettingSuffix<'auth'>` is `'jwt_secret' | …`. */
export type SettingSuffix<P extends string> = SettingKey extends infer K
  ? K extends `${P}.${infer R}`
    ? R
    : never
  : never;

/** Reads a setting's value typed by its key (`Settings.get`, a rule's view of would-be values). */
export type SettingGetter = <K extends SettingKey>(key: K) => SettingValue<K>;

/** A definition from SETTINGS: its key is a known one, so `settings.get(def.key)` type-checks. */
export type KnownSettingDef = SettingDef & { readonly key: SettingKey };

/** Every definition, for code that goes through them all. */
export const SETTINGS: readonly KnownSettingDef[] = DEFINITIONS;

export const SETTINGS_BY_KEY = new Map<string, KnownSettingDef>(SETTINGS.map((s) => [s.key, s]));

export function envNames(def: SettingDef): readonly string[] {
  return def.env ?? ['BASALT_' + def.key.toUpperCase().replace(/\./g, '_')];
}

/** The TypeBox schema of one setting's value. */
export function schemaOf(def: SettingDef): TSchema {
  switch (def.kind) {
    case 'string':
      return def.pattern ? T.String({ pattern: def.pattern }) : T.String();
    case 'int':
      return T.Integer({ minimum: def.min, maximum: def.max });
    case 'bool':
      return T.Boolean();
    case 'enum':
      return T.Union((def.values ?? []).map((v) => T.Literal(v)));
    case 'list':
      return T.Array(T.String());
    case 'json':
      return def.schema ?? T.Unknown();
  }
}
