/**
 * basalt-client: Basalt's front-end client (docs/client.md). No dependencies: fetch,
 * streams and (in browsers) localStorage, Web Locks and XMLHttpRequest for upload progress.
 * One file on purpose: it is built to one ES module and one declaration file, both served by
 * the executable at /api/client.js and /api/client.d.ts.
 */

// ---------------------------------------------------------------- types of the schema

/** One table as `basalt types` describes it. `Relations` maps each `expand` name to the table it reaches. */
export interface TableShape {
  Row: object;
  Insert: object;
  Update: object;
  Relations: object;
}

/** The shape `createClient<DB>` reads: what `basalt types` prints. */
export interface DatabaseShape {
  tables: { [table: string]: TableShape };
}

// biome-ignore lint/suspicious/noExplicitAny: an untyped client accepts any column and value
type AnyRow = Record<string, any>;

/** The schema of a client created without a type parameter: any table, any column. */
export interface UntypedDB {
  tables: { [table: string]: { Row: AnyRow; Insert: AnyRow; Update: AnyRow; Relations: Record<string, string> } };
}

type Tables<DB extends DatabaseShape> = DB['tables'];
type TableName<DB extends DatabaseShape> = keyof Tables<DB> & string;
type RowOf<DB extends DatabaseShape, T extends TableName<DB>> = Tables<DB>[T]['Row'];
type Col<R> = keyof R & string;
/** A one-to-many relation's name (`<table>_via_<column>`) expands to an array, a many-to-one one to a row or null. */
type Expanded<N extends string, R> = N extends `${string}_via_${string}` ? R[] : R | null;

// ---------------------------------------------------------------- errors

/**
 * Every failure of the client: the server's answer in any of its envelopes (A, B, C), or
 * `status` 0 with `code` `network_error` when no answer came.
 */
export class BasaltError extends Error {
  override name = 'BasaltError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Seconds to wait before retrying (429, 503), when the server said. */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: a parsed JSON body of unknown envelope
async function errorOf(res: Response, body?: any): Promise<BasaltError> {
  if (body === undefined) body = await res.json().catch(() => null);
  let code = 'http_error';
  let message = `HTTP ${res.status}`;
  let details: Record<string, unknown> | undefined;
  let retry: unknown;
  const e = body?.error;
  if (e && typeof e === 'object') {
    // A: {success: false, error: {code, message, retry_after?, details?}}
    ({ code, message, details } = e);
    retry = e.retry_after;
  } else if (Array.isArray(body?.errors) && body.errors[0]) {
    // B: {success: false, data: {}, meta, errors: [{code, message, details}]}
    ({ code, message, details } = body.errors[0]);
    retry = details?.retry_after;
  } else if (typeof e === 'string') {
    // C: {success: false, error: "message", code}
    message = e;
    code = body.code ?? code;
  }
  retry ??= res.headers.get('retry-after') || undefined;
  const seconds = Number(retry);
  return new BasaltError(res.status, code, message, details, retry != null && seconds >= 0 ? seconds : undefined);
}

const networkError = (cause: unknown) =>
  new BasaltError(0, 'network_error', `no answer from the server: ${(cause as Error)?.message ?? cause}`);

// ---------------------------------------------------------------- storage

/** Where the session is kept: `local` (localStorage, shared by the tabs of an origin), `memory`, or your own. */
export interface SessionStorage {
  get(key: string): string | null | Promise<string | null>;
  set(key: string, value: string): void | Promise<void>;
  remove(key: string): void | Promise<void>;
}

function storageOf(kind: 'local' | 'memory' | SessionStorage | undefined): SessionStorage {
  if (typeof kind === 'object') return kind;
  const local = (globalThis as { localStorage?: Storage }).localStorage;
  if (kind !== 'memory' && local)
    return { get: (k) => local.getItem(k), set: (k, v) => local.setItem(k, v), remove: (k) => local.removeItem(k) };
  const m = new Map<string, string>();
  return { get: (k) => m.get(k) ?? null, set: (k, v) => void m.set(k, v), remove: (k) => void m.delete(k) };
}

// ---------------------------------------------------------------- options and the client

export interface ClientOptions {
  /** The site public key, sent as X-API-Key (needed when web.public_api_access_mode is api_key_required). */
  publicKey?: string;
  /** Where the session is kept; default `local` in a browser, `memory` elsewhere. */
  storage?: 'local' | 'memory' | SessionStorage;
  /** A fetch of your own (tests, instrumentation); default the global one. */
  fetch?: (url: string, init?: RequestInit) => Promise<Response>;
  /**
   * The main listener's base for files, when the server splits its listeners
   * (web.public_api_separate; runtime config `main_api_base_url`); default `url`.
   */
  filesUrl?: string;
}

export interface User {
  id: string;
  email: string;
  email_verified: boolean;
  email_verified_at: string | null;
  created_at: string;
  [field: string]: unknown;
}

export interface Session {
  access_token: string;
  refresh_token: string;
  /** When the access token expires, ms since the epoch, by this client's clock. */
  expires_at: number;
  /** The access token's lifetime in seconds (auth.access_token_seconds). */
  expires_in: number;
  user: User;
}

export type AuthEvent = 'signed_in' | 'signed_out' | 'refreshed';

interface Call {
  method?: string;
  body?: unknown;
  /** Send the user's access token (refreshed first when it is about to expire). Default true. */
  auth?: boolean;
}

export interface Client<DB extends DatabaseShape = UntypedDB> {
  readonly url: string;
  readonly auth: Auth;
  readonly realtime: Realtime<DB>;
  readonly files: Files;
  from<T extends TableName<DB>>(table: T): Table<DB, T>;
  /** Runs `fn` in one database transaction: committed when it returns, rolled back when it throws. */
  transaction<R>(fn: (tx: { from: Client<DB>['from'] }) => Promise<R>): Promise<R>;
  /** Calls any JSON route of the server (format A, B or C), with the session's token; `data` of the answer. */
  request<R = unknown>(path: string, init?: { method?: string; body?: unknown; auth?: boolean }): Promise<R>;
}

/** A client for the Basalt server at `url` (its public origin, e.g. `https://api.example.com`). */
export function createClient<DB extends DatabaseShape = UntypedDB>(
  url: string,
  options: ClientOptions = {},
): Client<DB> {
  return new BasaltClient<DB>(url, options);
}

/** What the parts of a client (auth, data, realtime, files) call. */
interface Transport {
  readonly url: string;
  readonly filesUrl: string;
  readonly auth: Auth;
  headers(auth?: boolean): Promise<{ headers: Record<string, string>; token?: string }>;
  send(path: string, init: RequestInit & { auth?: boolean }): Promise<Response>;
  request<R = unknown>(path: string, call?: Call): Promise<R>;
}

class BasaltClient<DB extends DatabaseShape> implements Client<DB>, Transport {
  readonly url: string;
  readonly filesUrl: string;
  readonly auth: Auth;
  readonly realtime: Realtime<DB>;
  readonly files: Files;
  readonly fetch: (url: string, init?: RequestInit) => Promise<Response>;

  constructor(
    url: string,
    readonly options: ClientOptions,
  ) {
    this.url = url.replace(/\/+$/, '');
    this.filesUrl = (options.filesUrl ?? url).replace(/\/+$/, '');
    this.fetch = options.fetch ?? ((url, init) => fetch(url, init));
    this.auth = new Auth(this, storageOf(options.storage));
    this.realtime = new Realtime(this);
    this.files = new Files(this);
  }

  from<T extends TableName<DB>>(table: T): Table<DB, T> {
    return new Table(this, table);
  }

  async transaction<R>(fn: (tx: { from: Client<DB>['from'] }) => Promise<R>): Promise<R> {
    const { transaction_id: id } = await this.request<{ transaction_id: string }>('/api/v1/db/transaction/begin', {
      body: {},
    });
    const end = (how: string) => this.request(`/api/v1/db/transaction/${id}/${how}`, { body: {} });
    let result: R;
    try {
      result = await fn({ from: (table) => new Table(this, table, id) });
    } catch (e) {
      await end('rollback').catch(() => {}); // the transaction may have ended already; the first error matters
      throw e;
    }
    await end('commit');
    return result;
  }

  /** Headers of a call: the public key, the user's access token (fresh) when `auth`. */
  async headers(auth = true): Promise<{ headers: Record<string, string>; token?: string }> {
    const headers: Record<string, string> = {};
    if (this.options.publicKey) headers['x-api-key'] = this.options.publicKey;
    const token = auth ? await this.auth.token() : undefined;
    if (token) headers.authorization = `Bearer ${token}`;
    return { headers, token };
  }

  /**
   * One HTTP call. A 401 `token_expired` refreshes the session (once for all concurrent
   * calls) and sends the call again, once.
   */
  async send(path: string, init: RequestInit & { auth?: boolean }, retried = false): Promise<Response> {
    const url = /^https?:/.test(path) ? path : this.url + path;
    // The session's token and the public key go to this server only, never to another URL given.
    const ours = [this.url, this.filesUrl].some((b) => url.startsWith(b) && '/?#'.includes(url.charAt(b.length)));
    const { headers, token } = ours ? await this.headers(init.auth !== false) : { headers: {}, token: undefined };
    let res: Response;
    try {
      res = await this.fetch(url, {
        ...init,
        headers: { ...headers, ...(init.headers as object) },
      });
    } catch (e) {
      throw networkError(e);
    }
    if (res.status === 401 && token && !retried) {
      const body = await res
        .clone()
        .json()
        .catch(() => null);
      if (body?.error?.code === 'token_expired' || body?.code === 'token_expired') {
        await this.auth.refresh(token);
        return this.send(path, init, true);
      }
    }
    return res;
  }

  async request<R = unknown>(path: string, call: Call = {}): Promise<R> {
    const json = call.body !== undefined;
    const res = await this.send(path, {
      method: call.method ?? (json ? 'POST' : 'GET'),
      auth: call.auth,
      headers: json ? { 'content-type': 'application/json' } : {},
      body: json ? JSON.stringify(call.body) : undefined,
    });
    return unwrap<R>(res);
  }
}

/** The payload of a success in any envelope: A and B carry `data`, C its fields beside `success`. */
async function unwrap<R>(res: Response): Promise<R> {
  const body = await res.json().catch(() => null);
  if (!res.ok || !body || body.success === false) throw await errorOf(res, body);
  return ('data' in body ? body.data : body) as R;
}

// ---------------------------------------------------------------- auth

interface TokenAnswer {
  user: User;
  access_token?: string;
  refresh_token?: string;
  expires_in?: number;
  mfa_required?: true;
  mfa_token?: string;
}

export type SignInResult = { user: User; mfaRequired?: false } | { user: null; mfaRequired: true };

const AUTH = '/api/v1/auth/';

export class Auth {
  private session: Session | null = null;
  private listeners = new Set<(event: AuthEvent, user: User | null) => void>();
  private refreshing?: Promise<Session | null>;
  private mfaToken?: string;
  private readonly key: string;
  /** Resolves once the stored session has been read. */
  readonly ready: Promise<void>;

  constructor(
    private c: Transport,
    private storage: SessionStorage,
  ) {
    this.key = `basalt.session:${c.url}`;
    this.ready = Promise.resolve()
      .then(() => this.read())
      .then((s) => {
        // A sign-in may have completed meanwhile: it wins.
        if (s && !this.session) {
          this.session = s;
          this.emit('signed_in');
        }
      })
      .catch(() => {}); // an unreadable storage: signed out
    // Another tab of this origin signed in, refreshed or signed out (local storage only fires this).
    (globalThis as { addEventListener?: Window['addEventListener'] }).addEventListener?.('storage', (e) => {
      if (e.key !== this.key) return;
      const next = parse(e.newValue);
      const had = this.session;
      this.session = next;
      if (!next) had && this.emit('signed_out');
      else this.emit(had?.user.id === next.user.id ? 'refreshed' : 'signed_in');
    });
  }

  /** The signed-in user, or null. */
  get user(): User | null {
    return this.session?.user ?? null;
  }

  /** Calls `fn` on every change of the session; returns the function that stops it. */
  onChange(fn: (event: AuthEvent, user: User | null) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  async signUp(input: { email: string; password: string }): Promise<{ user: User; verificationRequired: boolean }> {
    const a = await this.post<TokenAnswer & { verification_required: boolean }>('register', input);
    if (a.access_token) await this.keep(a, 'signed_in');
    return { user: a.user, verificationRequired: a.verification_required };
  }

  signIn(input: { email: string; password: string }): Promise<SignInResult> {
    return this.signedIn(this.post('login', input));
  }

  /** The second step when a sign-in answered `mfaRequired`: a TOTP code, or a recovery code (`xxxxx-xxxxx`). */
  async verifyTotp(code: string): Promise<SignInResult> {
    if (!this.mfaToken) throw new BasaltError(400, 'mfa_not_started', 'verifyTotp: sign in first (mfaRequired)');
    const field = /^\s*\d{6}\s*$/.test(code) ? 'code' : 'recovery_code';
    return this.signedIn(this.post('mfa/verify', { mfa_token: this.mfaToken, [field]: code }));
  }

  /** Mails a sign-in code to `email` (the answer is the same whether or not the address has an account). */
  async requestCode(email: string): Promise<void> {
    await this.post('otp/request', { email });
  }

  signInWithCode(email: string, code: string): Promise<SignInResult> {
    return this.signedIn(this.post('otp/verify', { email, code }));
  }

  /**
   * Sends the browser to the provider's sign-in (a navigation). It comes back to
   * `redirectTo` (listed in auth.redirect_allowlist), whose page calls completeProviderSignIn().
   * Returns the URL (outside a browser, open it yourself).
   */
  signInWithProvider(provider: string, options: { redirectTo: string }): string {
    const url = `${this.c.url}${AUTH}oauth/${encodeURIComponent(provider)}/start?redirect_to=${encodeURIComponent(options.redirectTo)}`;
    (globalThis as { location?: Location }).location?.assign(url);
    return url;
  }

  /**
   * On the page the provider sign-in returned to: reads `#code=…` (or `#error=…`) from the
   * address, removes it from the address bar and exchanges the code for a session. Null when
   * the address carries neither.
   */
  async completeProviderSignIn(hash?: string): Promise<SignInResult | null> {
    const loc = (globalThis as { location?: Location }).location;
    const p = new URLSearchParams((hash ?? loc?.hash ?? '').replace(/^#/, ''));
    const code = p.get('code');
    const error = p.get('error');
    if (!code && !error) return null;
    if (hash === undefined && loc) history.replaceState(null, '', loc.pathname + loc.search);
    if (error) throw new BasaltError(400, error, `provider sign-in failed: ${error}`);
    return this.signedIn(this.post('oauth/exchange', { code }));
  }

  /** Ends the session on the server (when it can be reached) and here; fires `signed_out`. */
  async signOut(): Promise<void> {
    const s = this.session;
    if (s)
      await this.c.request(`${AUTH}logout`, { body: { refresh_token: s.refresh_token }, auth: false }).catch(() => {}); // signed out here whatever the server says: the tokens are dropped
    await this.drop();
  }

  /**
   * The access token for a call, refreshed first when it expires within a quarter of its
   * lifetime (at most 30 s).
   */
  async token(): Promise<string | undefined> {
    await this.ready;
    const s = this.session;
    if (!s) return undefined;
    return fresh(s) ? s.access_token : (await this.refresh(s.access_token))?.access_token;
  }

  /**
   * Refreshes the session now: once for every concurrent caller of this client, and, in
   * browsers with Web Locks, once across the tabs sharing its storage (a tab that waited
   * takes the session the other stored). A refusal (401, 403) signs out and fires
   * `signed_out`; a network failure leaves the session as it is. `stale`: the access token
   * the caller found expired; when the session has moved on since, nothing is refreshed.
   */
  refresh(stale?: string): Promise<Session | null> {
    this.refreshing ??= this.exclusive(() => this.rotate(stale)).finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private exclusive<R>(fn: () => Promise<R>): Promise<R> {
    const locks = (globalThis as { navigator?: { locks?: LockManager } }).navigator?.locks;
    return locks ? locks.request(this.key, fn) : fn();
  }

  private async rotate(stale?: string): Promise<Session | null> {
    const stored = await this.read();
    const had = this.session;
    if (stored && stored.refresh_token !== had?.refresh_token) {
      this.session = stored; // another tab refreshed (or signed in) meanwhile
      if (fresh(stored)) return stored;
    }
    const s = this.session;
    if (!s) return null;
    if (stale && s.access_token !== stale && fresh(s)) return s;
    try {
      await this.keep(await this.post<TokenAnswer>('refresh', { refresh_token: s.refresh_token }), 'refreshed');
    } catch (e) {
      if (e instanceof BasaltError && (e.status === 401 || e.status === 403)) await this.drop();
      throw e;
    }
    return this.session;
  }

  private post<R>(path: string, body: unknown): Promise<R> {
    return this.c.request<R>(AUTH + path, { body, auth: false });
  }

  private async signedIn(answer: Promise<TokenAnswer>): Promise<SignInResult> {
    const a = await answer;
    if (a.mfa_required) {
      this.mfaToken = a.mfa_token;
      return { user: null, mfaRequired: true };
    }
    this.mfaToken = undefined;
    await this.keep(a, 'signed_in');
    return { user: a.user };
  }

  private async keep(a: TokenAnswer, event: AuthEvent): Promise<void> {
    const s: Session = {
      access_token: a.access_token!,
      refresh_token: a.refresh_token!,
      expires_in: a.expires_in!,
      expires_at: Date.now() + a.expires_in! * 1000,
      user: a.user ?? this.session?.user,
    };
    this.session = s;
    await this.storage.set(this.key, JSON.stringify(s));
    this.emit(event);
  }

  private async drop(): Promise<void> {
    const had = this.session;
    this.session = null;
    await this.storage.remove(this.key);
    if (had) this.emit('signed_out');
  }

  private async read(): Promise<Session | null> {
    return parse(await this.storage.get(this.key));
  }

  private emit(event: AuthEvent): void {
    for (const fn of this.listeners) fn(event, this.user);
  }
}

function parse(text: string | null | undefined): Session | null {
  try {
    const s = text ? JSON.parse(text) : null;
    return s?.refresh_token ? s : null;
  } catch {
    return null;
  }
}

function fresh(s: Session): boolean {
  return s.expires_at - Date.now() > Math.min(30_000, s.expires_in * 250);
}

// ---------------------------------------------------------------- data

export type Op = 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte' | 'in' | 'not_in' | 'like' | 'ilike' | 'is_null';
/** One item of `filters`: a condition, or a group (docs/database.md). */
export type FilterItem =
  | { field: string; op: Op; value: unknown }
  | { or: FilterItem[] }
  | { and: FilterItem[] }
  | { not: FilterItem };

/** Conditions, AND-ed; `or`, `and` and `not` nest groups. */
export class Filters<R> {
  /** The filter items so far, as the Database API takes them. */
  readonly items: FilterItem[] = [];

  filter(field: string, op: Op, value: unknown): this {
    this.items.push({ field, op, value });
    return this;
  }
  eq<C extends Col<R>>(column: C, value: NonNullable<R[C]>): this {
    return this.filter(column, 'eq', value);
  }
  neq<C extends Col<R>>(column: C, value: NonNullable<R[C]>): this {
    return this.filter(column, 'neq', value);
  }
  gt<C extends Col<R>>(column: C, value: NonNullable<R[C]>): this {
    return this.filter(column, 'gt', value);
  }
  gte<C extends Col<R>>(column: C, value: NonNullable<R[C]>): this {
    return this.filter(column, 'gte', value);
  }
  lt<C extends Col<R>>(column: C, value: NonNullable<R[C]>): this {
    return this.filter(column, 'lt', value);
  }
  lte<C extends Col<R>>(column: C, value: NonNullable<R[C]>): this {
    return this.filter(column, 'lte', value);
  }
  in<C extends Col<R>>(column: C, values: readonly NonNullable<R[C]>[]): this {
    return this.filter(column, 'in', values);
  }
  notIn<C extends Col<R>>(column: C, values: readonly NonNullable<R[C]>[]): this {
    return this.filter(column, 'not_in', values);
  }
  like<C extends Col<R>>(column: C, pattern: string): this {
    return this.filter(column, 'like', pattern);
  }
  ilike<C extends Col<R>>(column: C, pattern: string): this {
    return this.filter(column, 'ilike', pattern);
  }
  /** `isNull(c)`: c IS NULL; `isNull(c, false)`: c IS NOT NULL. */
  isNull<C extends Col<R>>(column: C, isNull = true): this {
    return this.filter(column, 'is_null', isNull);
  }
  /** At least one of the conditions `fn` adds. */
  or(fn: (q: Filters<R>) => Filters<R>): this {
    this.items.push({ or: fn(new Filters<R>()).items });
    return this;
  }
  and(fn: (q: Filters<R>) => Filters<R>): this {
    this.items.push({ and: fn(new Filters<R>()).items });
    return this;
  }
  /** Not all of the conditions `fn` adds hold (with one condition: it does not hold). */
  not(fn: (q: Filters<R>) => Filters<R>): this {
    const items = fn(new Filters<R>()).items;
    this.items.push({ not: items.length === 1 ? items[0]! : { and: items } });
    return this;
  }
}

export interface Result<O> {
  rows: O[];
  /** Rows returned or affected. */
  count: number;
  /** With `select(…, { total: true })`: rows matching the filters, ignoring limit and offset. */
  total?: number;
}

type Fn = 'count' | 'count_distinct' | 'sum' | 'avg' | 'min' | 'max';
/** `{count: 'n', sum: {total: 'revenue'}}`: `count` alone names the row count; the others map a column to its name. */
export type AggregateSpec<R> = { count?: string | { [C in Col<R>]?: string } } & {
  [F in Exclude<Fn, 'count'>]?: { [C in Col<R>]?: string };
};

/** One table: start a select, insert, update, delete or aggregate. */
export class Table<DB extends DatabaseShape, T extends TableName<DB>> {
  constructor(
    private c: Transport,
    private table: T,
    private tx?: string,
  ) {}

  private q<O>(body: object): Query<DB, T, RowOf<DB, T>, O> {
    return new Query(this.c, { entity: this.table, ...body, transaction_id: this.tx });
  }

  /** Rows (all columns when `fields` is omitted); `total` adds the count of all matching rows. */
  select<K extends Col<RowOf<DB, T>>>(
    fields?: readonly K[],
    options: { total?: boolean } = {},
  ): Query<DB, T, RowOf<DB, T>, Pick<RowOf<DB, T>, K>> {
    return this.q({ action: 'select', fields, total: options.total });
  }

  /** One row or an array: the rows inserted (`fields` narrows what comes back). */
  insert(
    data: Tables<DB>[T]['Insert'] | readonly Tables<DB>[T]['Insert'][],
    fields?: readonly Col<RowOf<DB, T>>[],
  ): Query<DB, T, RowOf<DB, T>, RowOf<DB, T>> {
    return this.q({ action: 'insert', data, fields });
  }

  /** Needs at least one filter. */
  update(
    data: Tables<DB>[T]['Update'],
    fields?: readonly Col<RowOf<DB, T>>[],
  ): Query<DB, T, RowOf<DB, T>, RowOf<DB, T>> {
    return this.q({ action: 'update', data, fields });
  }

  /** Needs at least one filter. */
  delete(fields?: readonly Col<RowOf<DB, T>>[]): Query<DB, T, RowOf<DB, T>, RowOf<DB, T>> {
    return this.q({ action: 'delete', fields });
  }

  /** Groups and aggregates (docs/database.md): `groupBy`, `having`, `order` by a group or an aggregate. */
  // biome-ignore lint/suspicious/noExplicitAny: the aggregate's columns are named by the call
  aggregate(spec: AggregateSpec<RowOf<DB, T>>): Query<DB, T, RowOf<DB, T>, Record<string, any>> {
    const aggregates: { fn: string; field?: string; as: string }[] = [];
    for (const [fn, v] of Object.entries(spec))
      if (typeof v === 'string') aggregates.push({ fn, as: v });
      else for (const [field, as] of Object.entries(v ?? {})) aggregates.push({ fn, field, as: as as string });
    return this.q({ action: 'aggregate', aggregates });
  }
}

/** A request being built; `await` it (or `.then`) to run it. */
export class Query<DB extends DatabaseShape, T extends TableName<DB>, R, O>
  extends Filters<R>
  implements PromiseLike<Result<O>>
{
  // biome-ignore lint/suspicious/noExplicitAny: the request body, as the Database API takes it
  private body: Record<string, any>;

  constructor(
    private c: Transport | undefined,
    body: object,
  ) {
    super();
    this.body = body;
  }

  order(column: Col<R> | (string & {}), direction: 'asc' | 'desc' = 'asc'): this {
    (this.body.sort ??= []).push({ field: column, direction });
    return this;
  }
  limit(n: number): this {
    this.body.limit = n;
    return this;
  }
  offset(n: number): this {
    this.body.offset = n;
    return this;
  }
  /** Aggregate only: group by columns (or many-to-one paths such as `customer_id.country`). */
  groupBy(...columns: (Col<R> | (string & {}))[]): this {
    this.body.group_by = columns;
    return this;
  }
  /** Aggregate only: conditions on the aggregates' names and the group columns. */
  // biome-ignore lint/suspicious/noExplicitAny: aggregate names are the caller's
  having(fn: (q: Filters<any>) => Filters<any>): this {
    this.body.having = fn(new Filters()).items;
    return this;
  }

  /**
   * Adds a related row (many-to-one: `author_id`) or rows (one-to-many:
   * `comments_via_post_id`) under `expand.<name>`; `fn` narrows them (filters, order,
   * limit, offset, a nested expand).
   */
  expand<N extends keyof Tables<DB>[T]['Relations'] & string, K extends Col<RelRow<DB, T, N>> = Col<RelRow<DB, T, N>>>(
    name: N,
    fields?: readonly K[],
    fn?: (q: Query<DB, RelTable<DB, T, N>, RelRow<DB, T, N>, RelRow<DB, T, N>>) => unknown,
  ): Query<DB, T, R, O & { expand: { [P in N]: Expanded<P, Pick<RelRow<DB, T, N>, K>> } }> {
    const sub = new Query<DB, RelTable<DB, T, N>, RelRow<DB, T, N>, RelRow<DB, T, N>>(undefined, {});
    fn?.(sub);
    const rel = sub.request();
    if (fields) rel.fields = fields;
    (this.body.expand ??= {})[name] = rel;
    return this as never;
  }

  /** The body sent to POST /api/v1/db/query. */
  // biome-ignore lint/suspicious/noExplicitAny: JSON
  request(): Record<string, any> {
    const b = { ...this.body };
    if (this.items.length) b.filters = this.items;
    for (const k of Object.keys(b)) if (b[k] === undefined) delete b[k];
    return b;
  }

  // biome-ignore lint/suspicious/noThenProperty: a query runs when awaited, as supabase-js and Drizzle's do
  then<A = Result<O>, B = never>(
    ok?: ((value: Result<O>) => A | PromiseLike<A>) | null,
    fail?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.c!.request<Result<O>>('/api/v1/db/query', { body: this.request() }).then(ok, fail);
  }
}

type RelTable<DB extends DatabaseShape, T extends TableName<DB>, N> = Tables<DB>[T]['Relations'][N &
  keyof Tables<DB>[T]['Relations']] &
  TableName<DB>;
type RelRow<DB extends DatabaseShape, T extends TableName<DB>, N> = RowOf<DB, RelTable<DB, T, N>>;

// ---------------------------------------------------------------- realtime

/** What a subscription's callback receives (docs/realtime.md, Events). */
export type RealtimeEvent<DB extends DatabaseShape = UntypedDB, T extends TableName<DB> = TableName<DB>> =
  | {
      [K in T]: {
        event: 'change';
        id: string;
        table: K;
        action: 'insert' | 'update' | 'delete';
        /** insert and update: the row as you would read it; delete: the primary-key columns. */
        row: RowOf<DB, K>;
      };
    }[T]
  | { event: 'message'; id: string; channel: string; data: unknown }
  /** Events were missed beyond the server's retention: reload your data. The stream goes on. */
  | { event: 'reset'; id: string }
  /** The session was revoked or the user disabled: the subscription has ended. */
  | { event: 'revoked'; reason: string };

export interface SubscribeOptions {
  /** A failure: a refusal (400, 403, 404: the subscription ends) or a lost connection (it reconnects). */
  onError?(error: BasaltError): void;
  /** The stream is open (first time and after each reconnection). */
  onOpen?(): void;
}

export interface Subscription {
  close(): void;
}

export class Realtime<DB extends DatabaseShape> {
  constructor(private c: Transport) {}

  /**
   * Follows changes to `tables` (or `{tables, channels}`), reading the event stream through
   * fetch: the token goes in a header, never in the URL. Reconnects with backoff and
   * Last-Event-ID after a lost connection, a server restart or an expired token (refreshed
   * first), so no event is missed within the server's retention; `reset` says when some were.
   */
  subscribe<T extends TableName<DB>>(
    target: readonly T[] | { tables?: readonly T[]; channels?: readonly string[] },
    callback: (event: RealtimeEvent<DB, T>) => void,
    options: SubscribeOptions = {},
  ): Subscription {
    const { tables = [], channels = [] } = isArray(target) ? { tables: target } : target;
    const query = new URLSearchParams();
    if (tables.length) query.set('tables', tables.join(','));
    if (channels.length) query.set('channels', channels.join(','));
    const path = `/api/v1/realtime?${query}`;
    let closed = false;
    let last: string | undefined;
    let controller: AbortController | undefined;
    let wake: (() => void) | undefined;
    let base = 500;
    const fail = (e: unknown) => !closed && options.onError?.(e instanceof BasaltError ? e : networkError(e));
    const run = async () => {
      for (let attempt = 0; !closed; attempt++) {
        controller = new AbortController();
        try {
          // The token is refreshed by `send` when it expires within its margin, or after a 401 token_expired.
          const res = await this.c.send(path, {
            signal: controller.signal,
            headers: { accept: 'text/event-stream', ...(last ? { 'last-event-id': last } : {}) },
          });
          if (!res.ok) {
            const e = await errorOf(res);
            if (res.status !== 429 && res.status < 500) {
              // A refusal: asking again would get the same answer.
              fail(e);
              closed = true;
              return;
            }
            throw e;
          }
          attempt = 0;
          options.onOpen?.();
          const end = await readEvents(res.body!, (name, id, data) => {
            if (id) last = id;
            if (name === 'change' || name === 'message') callback({ event: name, id, ...data } as never);
            else if (name === 'reset') callback({ event: 'reset', id } as RealtimeEvent<DB, T>);
            else if (name === 'revoked') {
              closed = true;
              callback({ event: 'revoked', reason: data.reason });
            } else if (name === 'retry') base = Number(data) || base;
            return name === 'expired' || name === 'revoked';
          });
          // The access token expired: reconnect at once (with a refreshed one); nothing is lost.
          if (end === 'expired') attempt = -1;
        } catch (e) {
          fail(e);
        }
        if (closed) return;
        if (attempt >= 0)
          await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, Math.min(30_000, base * 2 ** attempt) * (0.5 + Math.random() / 2));
          });
      }
    };
    void run();
    return {
      close() {
        closed = true;
        controller?.abort();
        wake?.();
      },
    };
  }
}

function isArray<T>(x: unknown): x is readonly T[] {
  return Array.isArray(x);
}

/**
 * Reads server-sent events from a fetch body, calling `on(event, id, data)` per event (and
 * `retry` with its value); stops early when `on` returns true. Returns the last event's name.
 */
async function readEvents(
  body: ReadableStream<Uint8Array>,
  // biome-ignore lint/suspicious/noExplicitAny: JSON of the event
  on: (event: string, id: string, data: any) => boolean,
): Promise<string | undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data = '';
  let id = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return undefined;
      buffer += decoder.decode(value, { stream: true });
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop()!;
      for (const line of lines) {
        if (line === '') {
          if (data) {
            const name = event || 'message';
            if (on(name, id, JSON.parse(data))) return name;
          }
          event = data = '';
          continue;
        }
        const colon = line.indexOf(':');
        if (colon === 0) continue; // a comment (keep-alive)
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'data') data += (data ? '\n' : '') + value;
        else if (field === 'id') id = value;
        else if (field === 'retry') on('retry', '', value);
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// ---------------------------------------------------------------- files

/** A stored file (media-library module, docs/files.md). */
export interface FileInfo {
  id: string;
  name: string;
  content_type: string;
  size: number;
  etag: string;
  created_at: string;
  owner: { type: 'user' | 'key'; id: string };
  url: string;
}

const FILES = '/api/v1/files';

export class Files {
  constructor(private c: Transport) {}

  /**
   * Uploads `blob` as the signed-in user. `onProgress(sent, total)` follows the upload in
   * browsers (XMLHttpRequest); elsewhere it is called once, at the end.
   */
  async upload(
    blob: Blob,
    options: { name?: string; onProgress?: (sent: number, total: number) => void } = {},
  ): Promise<FileInfo> {
    const form = new FormData();
    form.append('file', blob, options.name ?? ((blob as File).name || 'file'));
    const XHR = (globalThis as { XMLHttpRequest?: typeof XMLHttpRequest }).XMLHttpRequest;
    const progress = options.onProgress;
    let res: Response;
    if (XHR && progress) {
      const { headers } = await this.c.headers();
      res = await new Promise<Response>((resolve, reject) => {
        const x = new XHR();
        x.open('POST', this.c.filesUrl + FILES);
        for (const [k, v] of Object.entries(headers)) x.setRequestHeader(k, v);
        x.upload.onprogress = (e) => progress(e.loaded, e.total);
        x.onload = () =>
          resolve(
            new Response(x.responseText, {
              status: x.status,
              headers: { 'retry-after': x.getResponseHeader('retry-after') ?? '' },
            }),
          );
        x.onerror = () => reject(networkError('upload failed'));
        x.send(form);
      });
    } else {
      res = await this.c.send(this.c.filesUrl + FILES, { method: 'POST', body: form });
      progress?.(blob.size, blob.size);
    }
    return (await unwrap<{ file: FileInfo }>(res)).file;
  }

  /** The file's content URL (`?download` asks for an attachment). Reading it needs the same credentials as the API. */
  url(id: string, options: { download?: boolean } = {}): string {
    return `${this.c.filesUrl}${FILES}/${encodeURIComponent(id)}/content${options.download ? '?download' : ''}`;
  }

  /** The bytes of a file, fetched with the session's token (for an `<img>`: `URL.createObjectURL(await files.get(id))`). */
  async get(id: string): Promise<Blob> {
    const res = await this.c.send(this.url(id), {});
    if (!res.ok) throw await errorOf(res);
    return res.blob();
  }

  async list(options: { limit?: number; offset?: number } = {}): Promise<{ files: FileInfo[]; total: number }> {
    const q = new URLSearchParams(Object.entries(options).map(([k, v]) => [k, String(v)]));
    return this.c.request(`${this.c.filesUrl}${FILES}?${q}`);
  }

  async remove(id: string): Promise<void> {
    await this.c.request(`${this.c.filesUrl}${FILES}/${encodeURIComponent(id)}`, { method: 'DELETE' });
  }
}
