/**
 * The panel's only way to the server: `/api/admin/*` (docs/admin-api.md), same-origin
 * cookie session, the session's CSRF token echoed in `X-CSRF-Token` on every change,
 * format A errors turned into ApiError. A 401 `unauthorized` marks the session as lost:
 * the shell then asks to sign in again over the current screen, which keeps what the
 * operator typed. Both ways are typed from the schemas the routes declare: answers from
 * `Responses` (src/modules/admin/responses.ts), request bodies from `Bodies`
 * (src/modules/admin/model.ts), so a renamed or mistyped field fails `tsc`.
 */
import { signal } from '@preact/signals';
import type { Static } from 'elysia';
import type { Bodies } from '../modules/admin/model';
import type { AdminAnswer, Responses } from '../modules/admin/responses';

/**
 * The `data` of an admin API answer as it arrives in JSON, typed from the schema the
 * route declares (src/modules/admin/responses.ts): `get<AdminData<'keys'>>('/keys')`.
 */
export type AdminData<K extends keyof typeof Responses> = Wire<AdminAnswer<K>>;

/** What the route that takes body `name` accepts (src/modules/admin/model.ts). */
export type AdminBody<K extends keyof typeof Bodies> = Static<(typeof Bodies)[K]>;

declare const checked: unique symbol;
/** A request body made by `body(…)`: post, put and patch take no other. */
export type Body = { readonly [checked]: true };

/**
 * A request body checked against the schema of the route it goes to:
 * `post('/keys', body('createKey', { type, name }))`. The value is sent as it is.
 */
export const body = <K extends keyof typeof Bodies>(_route: K, value: AdminBody<K>) => value as AdminBody<K> & Body;

export type Session = AdminData<'session'>;
export type Admin = Session['admin'];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** `details.fields`: field name → what is wrong with it. */
    readonly fields: Record<string, string> = {},
    readonly details: Record<string, unknown> = {},
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** undefined while unknown (first load), null when signed out. */
export const session = signal<Session | null | undefined>(undefined);
/** True when a request answered 401 while a session was held. */
export const sessionLost = signal(false);

export function setSession(s: Session | null) {
  session.value = s;
  sessionLost.value = false;
}

const BASE = '/api/admin';

async function send(method: string, path: string, body: unknown): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const token = session.value?.csrf_token;
  if (method !== 'GET' && token) headers['x-csrf-token'] = token;
  try {
    return await fetch(BASE + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError(0, 'network', 'The server did not answer. Check that Basalt is running, then try again.');
  }
}

/** A format A answer, as far as the panel reads it; any other JSON decodes to a generic error. */
interface Answer {
  success?: boolean;
  data?: unknown;
  error?: {
    code?: string;
    message?: string;
    retry_after?: number;
    details?: { fields?: Record<string, string> } & Record<string, unknown>;
  };
}

async function decode<T>(res: Response): Promise<T> {
  let json: Answer | null;
  try {
    json = (await res.json()) as Answer | null;
  } catch {
    throw new ApiError(
      res.status,
      'bad_response',
      res.status === 404
        ? 'This part of the admin API is not available on this server.'
        : `Unexpected answer from the server (HTTP ${res.status}).`,
    );
  }
  if (json?.success) return json.data as T;
  const e: NonNullable<Answer['error']> = json?.error ?? {};
  const retry = e.retry_after ?? (Number(res.headers.get('retry-after')) || undefined);
  throw new ApiError(
    res.status,
    e.code ?? 'error',
    e.message ?? `HTTP ${res.status}`,
    e.details?.fields ?? {},
    e.details ?? {},
    retry,
  );
}

export async function api<T = unknown>(method: string, path: string, body?: Body): Promise<T> {
  let res = await send(method, path, body);
  // Another tab signed in again (new token): take the current one and try once more.
  if (res.status === 403 && session.value && method !== 'GET') {
    const copy = res.clone();
    const code = await copy.json().then(
      (j) => j?.error?.code,
      () => undefined,
    );
    if (code === 'csrf_failed') {
      const me = await send('GET', '/auth/me', undefined);
      if (me.ok) {
        session.value = await decode<Session>(me);
        res = await send(method, path, body);
      }
    }
  }
  try {
    return await decode<T>(res);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401 && e.code === 'unauthorized' && session.value)
      sessionLost.value = true;
    throw e;
  }
}

export const get = <T = unknown>(path: string) => api<T>('GET', path);
export const post = <T = unknown>(path: string, body?: Body) => api<T>('POST', path, body);
export const put = <T = unknown>(path: string, body: Body) => api<T>('PUT', path, body);
export const patch = <T = unknown>(path: string, body: Body) => api<T>('PATCH', path, body);
export const del = <T = unknown>(path: string) => api<T>('DELETE', path);

/** `?a=1&b=2` from the defined, non-empty values. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? '?' + s : '';
}

/** Words an operator can act on, for errors not tied to one field. */
export function explain(e: unknown): string {
  if (!(e instanceof ApiError)) return e instanceof Error ? e.message : String(e);
  if (e.code === 'rate_limited' || e.code === 'account_locked') {
    return e.retryAfter ? `${e.message} Try again in ${e.retryAfter} s.` : e.message;
  }
  if (e.code === 'csrf_failed') return 'The request was refused as cross-site. Reload the page and try again.';
  if (e.code === 'unauthorized') return 'Your session ended. Sign in again to continue.';
  return e.message;
}

/** A server-side type as it arrives in JSON: dates as ISO strings. The panel imports the admin API's types through it. */
export type Wire<T> = T extends Date
  ? string
  : T extends readonly (infer E)[]
    ? Wire<E>[]
    : T extends object
      ? { [K in keyof T]: Wire<T[K]> }
      : T;
