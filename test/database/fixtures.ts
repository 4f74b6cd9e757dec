/**
 * Application tables and request helpers shared by the Database API suites.
 */
import { expect } from 'bun:test';
import type { Reply, TestServer } from '../helpers/server';
import { expectAError } from '../helpers/envelopes';

export const SCHEMA_SQL = `
CREATE TABLE public.items (
  id serial PRIMARY KEY,
  name text NOT NULL UNIQUE,
  qty int4,
  price numeric(10,2),
  category varchar(12),
  active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT qty_not_negative CHECK (qty >= 0)
);
CREATE TABLE public.orders (
  id serial PRIMARY KEY,
  item_id int4 NOT NULL REFERENCES public.items(id),
  ref uuid,
  note text
);
CREATE TABLE public.many (n int4 PRIMARY KEY);
`;

export const ITEMS = [
  { name: 'apple', qty: 5, price: '1.20', category: 'fruit', active: true },
  { name: 'banana', qty: 0, price: '0.50', category: 'fruit', active: true },
  { name: 'Carrot', qty: 12, price: '0.80', category: 'veg', active: false },
  { name: 'date', qty: null, price: '3.00', category: null, active: true },
  { name: 'eggplant', qty: 7, price: null, category: 'veg', active: true },
];

/** The tables as `startServer`'s migrations (both targets: the source and the executable). */
export const TABLE_MIGRATIONS = { '001_tables.sql': SCHEMA_SQL };

export async function setupTables(s: TestServer): Promise<void> {
  await s.platform.db.exec(SCHEMA_SQL);
}

/** POST /api/v1/db/query with a key. */
export function query(s: TestServer, key: string | undefined, body: unknown): Promise<Reply> {
  return s.req('POST', '/api/v1/db/query', { headers: key ? { 'x-api-key': key } : {}, body });
}

export function tx(s: TestServer, key: string, path: string): Promise<Reply> {
  return s.req('POST', `/api/v1/db/transaction/${path}`, { headers: { 'x-api-key': key }, body: {} });
}

/** A format A error with this status and code (test/helpers/envelopes.ts), and no SQL text or internals in it. */
export function expectError(r: Reply, status: number, code: string): void {
  expectAError(r, status, code);
  expectNoInternals(r.text);
}

/** Phrases only SQL text, server messages or stack traces would contain. */
const INTERNAL = [
  /SELECT .* FROM/i,
  /INSERT INTO/i,
  /RETURNING/i,
  /::text/,
  /\$\d/,
  /syntax error/i,
  /pg_catalog/,
  /\bat .*\.ts:\d+/,
  /invalid input syntax/i,
  /violates/i,
  /SQLSTATE/i,
];

export function expectNoInternals(text: string): void {
  for (const re of INTERNAL) expect(text).not.toMatch(re);
}
