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

/** Check a creation request against docs/api-keys.md; throws `KeyErrors.invalid` with a message saying what to fix. */
export function validateKeyInput(input: CreateKeyInput, now = new Date()): KeySpec {
  if (!input || typeof input !== 'object')
    throw KeyErrors.invalid('type', "A key needs a type: 'public' or 'service'.");
  const type = input.type;
  if (type !== 'public' && type !== 'service') throw KeyErrors.invalid('type', "type must be 'public' or 'service'.");
  const name = text('name', input.name);
  const service = text('service', input.service);
  const permissions = list('permissions', input.permissions);
  const tables = list('tables', input.tables);
  const expiresAt = expiry(input.expiresAt, now);
  const site = input.site === true;

  if (type === 'public') {
    // A public key is visible in front-ends: it opens auth, runtime config and module routes only.
    if (permissions.length)
      throw KeyErrors.invalid(
        'permissions',
        'Public keys carry no permissions; create a service key for mail, database or files access.',
      );
    if (tables.length)
      throw KeyErrors.invalid(
        'tables',
        'Public keys have no table whitelist; create a service key with db:query for database access.',
      );
    if (service)
      throw KeyErrors.invalid('service', 'Only service keys are bound to a service; omit service for a public key.');
    return { type, name, service: null, permissions, tables, expiresAt, site };
  }

  if (site) throw KeyErrors.invalid('site', 'Only a public key can be the site public key.');
  if (!service)
    throw KeyErrors.invalid('service', 'A service key must name the service it belongs to (e.g. --service billing).');
  const unknown = permissions.filter((p) => !(PERMISSIONS as readonly string[]).includes(p));
  if (unknown.length) {
    throw KeyErrors.invalid(
      'permissions',
      `Unknown permission${unknown.length > 1 ? 's' : ''} ${unknown.map((p) => `'${p}'`).join(', ')}; allowed: ${PERMISSIONS.join(', ')}.`,
    );
  }
  if (!permissions.length)
    throw KeyErrors.invalid('permissions', `A service key needs at least one permission: ${PERMISSIONS.join(', ')}.`);
  const db = permissions.includes('db:query') || permissions.includes('db:*');
  const bad = tables.find((t) => !IDENT.test(t));
  if (bad !== undefined)
    throw KeyErrors.invalid(
      'tables',
      `'${bad.slice(0, 80)}' is not a valid table name (letters, digits and _, not starting with a digit, at most 63 characters).`,
    );
  if (tables.length > MAX_TABLES) throw KeyErrors.invalid('tables', `At most ${MAX_TABLES} tables per key.`);
  if (db && !tables.length)
    throw KeyErrors.invalid(
      'tables',
      'A service key with db:query or db:* needs a non-empty table whitelist (e.g. --tables orders,customers).',
    );
  if (!db && tables.length)
    throw KeyErrors.invalid('tables', 'A table whitelist only applies to keys with db:query or db:*.');
  return { type, name, service, permissions, tables, expiresAt, site };
}
