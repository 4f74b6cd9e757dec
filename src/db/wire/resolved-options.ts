/**
 * What the external wire path (src/db/external-wire.ts) is given: the pool's settings as
 * postgres.js resolved them, and its own.
 */

export type Parser = ((text: string) => unknown) & { array?: boolean };

/** What postgres.js resolved for its pool (`sql.options`), the parts used here. */
export interface ResolvedOptions {
  host: string[];
  port: number[];
  path: string | false;
  user: string;
  pass: string | (() => string | Promise<string>);
  database: string;
  ssl: unknown;
  sslnegotiation?: unknown;
  socket?: unknown;
  target_session_attrs?: unknown;
  /** Seconds a connection lives (postgres.js's default: a random 30 to 60 minutes for each); none when falsy. */
  max_lifetime?: number | (() => number) | null;
  connection: Record<string, string | number | boolean | undefined>;
  parsers: Record<number, Parser>;
}

/** Why this path cannot serve the pool (it then keeps postgres.js), or null when it can. */
export function wireUnsupported(o: ResolvedOptions): string | null {
  if (o.sslnegotiation) return 'sslnegotiation';
  if (o.host.length > 1) return 'several hosts';
  if (o.socket) return 'a custom socket';
  if (o.target_session_attrs) return 'target_session_attrs';
  return null;
}

export interface WirePoolOptions {
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  /**
   * Behind a transaction-mode pooler (database.pooler): every statement is parsed into the
   * unnamed statement of its batch, none kept prepared (the next batch may reach another server
   * connection).
   */
  unnamed?: boolean;
}

/** A statement of a batch: its values are strings, finite numbers or nulls. */
export interface WireStatement {
  sql: string;
  params: readonly unknown[];
}
