/**
 * API key shapes and the rules a new key must satisfy (docs/api-keys.md). Pure: no
 * database, no HTTP, so the admin panel, the CLI and the service share one check.
 */
import { KeyErrors } from './errors';

export type KeyType = 'public' | 'service';

/** Every permission a service key may carry; `x:*` covers every `x:` permission. */
export const PERMISSIONS = [
  'mail:send',
  'mail:*',
  'db:query',
  'db:*',
  'files:upload',
  'files:download',
  'files:*',
] as const;
export type GrantablePermission = (typeof PERMISSIONS)[number];

/** What `create` accepts. */
export interface CreateKeyInput {
  type: KeyType;
  /** A label for people (e.g. "billing backend"). */
  name?: string | null;
  /** The service a service key belongs to (required for service keys). */
  service?: string | null;
  permissions?: string[];
  /** Tables of the data schema a `db:*`/`db:query` key may touch. */
  tables?: string[];
  /** When the key stops working; must be in the future. */
  expiresAt?: Date | string | null;
  /** Designate this public key as the site public key (setting web.site_public_key). */
  site?: boolean;
}

/** A validated creation request. */
export interface KeySpec {
  type: KeyType;
  name: string | null;
  service: string | null;
  permissions: string[];
  tables: string[];
  expiresAt: Date | null;
  site: boolean;
}

/** What lists show: never the key, never its hash. */
export interface KeyInfo {
  id: string;
  type: KeyType;
  name: string | null;
  service: string | null;
  permissions: string[];
  tables: string[];
  /** e.g. `sk_Ab3dE9`: the type prefix and the first characters of the key. */
  prefix: string;
  last4: string;
  /** `prefix…last4`, how people recognise a key. */
  display: string;
  status: 'active' | 'revoked' | 'expired';
  /** The designated site public key (shown in runtime config in api_key_required mode). */
  site: boolean;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

// Table names as the Database API accepts them: plain, unquoted-style Postgres identifiers.
const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const MAX_TABLES = 1000;
const MAX_TEXT = 200;

function text(field: string, v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw KeyErrors.invalid(field, `${field} must be a string.`);
  const s = v.trim();
  if (!s) return null;
  if (s.length > MAX_TEXT) throw KeyErrors.invalid(field, `${field} is longer than ${MAX_TEXT} characters.`);
  if (/[\u0000-\u001f\u007f]/.test(s)) throw KeyErrors.invalid(field, `${field} must not contain control characters.`);
  return s;
}

function list(field: string, v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
    throw KeyErrors.invalid(field, `${field} must be a list of strings.`);
  return [...new Set(v.map((x: string) => x.trim()).filter(Boolean))];
}

function expiry(v: unknown, now: Date): Date | null {
  if (v === undefined || v === null || v === '') return null;
  const d = v instanceof Date ? v : typeof v === 'string' ? new Date(v) : new Date(NaN);
  if (Number.isNaN(d.getTime()))
    throw KeyErrors.invalid('expires_at', 'expires_at must be an ISO 8601 date-time, e.g. 2030-01-31T00:00:00Z.');
  if (d.getTime() <= now.getTime()) throw KeyErrors.invalid('expires_at', 'expires_at must be in the future.');
  return d;
}

/**
 * Check a creation request against docs/api-keys.md; throws one `validation_error` naming
 * every field that is wrong (`details.fields`), each with a message saying what to fix.
 */
export function validateKeyInput(input: CreateKeyInput, now = new Date()): KeySpec {
  if (!input || typeof input !== 'object')
    throw KeyErrors.invalid('type', "A key needs a type: 'public' or 'service'.");
  const problems: Record<string, string> = {};
  const invalid = (field: string, message: string) => {
    problems[field] ??= message;
  };
  /** A field's value, or `fallback` with its problem noted. */
  const field = <T>(read: () => T, fallback: T): T => {
    try {
      return read();
    } catch (e) {
      const fields = (e as { extra?: { details?: { fields?: Record<string, string> } } }).extra?.details?.fields;
      if (!fields) throw e;
      for (const [f, m] of Object.entries(fields)) invalid(f, m);
      return fallback;
    }
  };
  const type = input.type;
  if (type !== 'public' && type !== 'service') invalid('type', "type must be 'public' or 'service'.");
  const name = field(() => text('name', input.name), null);
  const service = field(() => text('service', input.service), null);
  const permissions = field(() => list('permissions', input.permissions), [] as string[]);
  const tables = field(() => list('tables', input.tables), [] as string[]);
  const expiresAt = field(() => expiry(input.expiresAt, now), null);
  const site = input.site === true;
  const done = (): KeySpec => {
    const named = Object.keys(problems);
    if (named.length) throw KeyErrors.invalidFields(problems);
    return {
      type: type as KeyType,
      name,
      service: type === 'public' ? null : service,
      permissions,
      tables,
      expiresAt,
      site,
    };
  };

  if (type === 'public') {
    // A public key is visible in front-ends: it opens auth, runtime config and module routes only.
    if (permissions.length)
      invalid(
        'permissions',
        'Public keys carry no permissions; create a service key for mail, database or files access.',
      );
    if (tables.length)
      invalid('tables', 'Public keys have no table whitelist; create a service key with db:query for database access.');
    if (service) invalid('service', 'Only service keys are bound to a service; omit service for a public key.');
    return done();
  }
  if (type !== 'service') return done();

  if (site) invalid('site', 'Only a public key can be the site public key.');
  if (!service && !problems.service)
    invalid('service', 'A service key must name the service it belongs to (e.g. billing).');
  const unknown = permissions.filter((p) => !(PERMISSIONS as readonly string[]).includes(p));
  if (unknown.length) {
    invalid(
      'permissions',
      `Unknown permission${unknown.length > 1 ? 's' : ''} ${unknown.map((p) => `'${p}'`).join(', ')}; allowed: ${PERMISSIONS.join(', ')}.`,
    );
  }
  if (!permissions.length && !problems.permissions)
    invalid('permissions', `A service key needs at least one permission: ${PERMISSIONS.join(', ')}.`);
  const db = permissions.includes('db:query') || permissions.includes('db:*');
  const bad = tables.find((t) => !IDENT.test(t));
  if (bad !== undefined)
    invalid(
      'tables',
      `'${bad.slice(0, 80)}' is not a valid table name (letters, digits and _, not starting with a digit, at most 63 characters).`,
    );
  if (tables.length > MAX_TABLES) invalid('tables', `At most ${MAX_TABLES} tables per key.`);
  if (db && !tables.length && !problems.tables)
    invalid(
      'tables',
      'A service key with db:query or db:* needs a non-empty table whitelist (e.g. orders, customers).',
    );
  if (!db && tables.length) invalid('tables', 'A table whitelist only applies to keys with db:query or db:*.');
  return done();
}
