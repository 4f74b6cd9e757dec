import postgres from 'postgres';
import type { Db, QueryResult, Queryable, Tx, TxOptions } from './engine';
import { driverCall as run, runTransaction } from './engine';

type Sql = postgres.Sql | postgres.ReservedSql;

function queryable(sql: Sql, prepare = false): Queryable {
  return {
    query: <T>(text: string, params: unknown[] = []) =>
      run(async () => {
        const r = await sql.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare });
        const columns = (r as unknown as { columns?: { name: string; type: number }[] }).columns ?? [];
        return {
          rows: Array.from(r) as T[],
          rowCount: columns.length > 0 ? r.length : (r.count ?? r.length),
          fields: columns.map((c) => ({ name: c.name, typeId: c.type })),
        } satisfies QueryResult<T>;
      }),
    exec: (text: string) => run(async () => void (await sql.unsafe(text).simple())),
  };
}

/** Redact the password of a connection URL for messages. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `PostgreSQL at ${u.hostname}:${u.port || 5432}/${u.pathname.slice(1) || u.username}`;
  } catch {
    return 'PostgreSQL (unparseable URL)';
  }
}

export interface ExternalOptions {
  max?: number;
  connectTimeoutSeconds?: number;
  onNotice?: (msg: string) => void;
  /** Run-time parameters set when each connection starts (e.g. statement_timeout). */
  connection?: Record<string, string>;
  /**
   * Keep parameterized statements prepared per connection (one round trip instead of
   * describe + execute). For pools whose statement texts are few and repeated.
   */
  prepare?: boolean;
}

export async function openExternal(url: string, opts: ExternalOptions = {}): Promise<Db> {
  const prepare = opts.prepare ?? false;
  const sql = postgres(url, {
    max: opts.max ?? 20,
    connect_timeout: opts.connectTimeoutSeconds ?? 5,
    idle_timeout: 60,
    onnotice: () => {},
    types: {
      // JSON parameters are JSON text on both engines (callers stringify and cast `$n::jsonb`);
      // the driver's default would stringify a string a second time.
      json: {
        to: 3802,
        from: [114, 3802],
        serialize: (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v)),
        parse: (v: string) => JSON.parse(v),
      },
      // Same representation as the embedded engine: timestamps as Date, bytea as Uint8Array.
      bytea: {
        to: 17,
        from: [17],
        serialize: (v: Uint8Array) => '\\x' + Buffer.from(v).toString('hex'),
        parse: (v: string) => new Uint8Array(Buffer.from(v.slice(2), 'hex')),
      },
    },
    connection: { application_name: 'basalt', ...opts.connection },
  });
  // Fail fast with a clear cause when the server is not there.
  await run(() => sql`select 1`);
  const base = queryable(sql, prepare);

  async function begin(opts: TxOptions = {}): Promise<Tx> {
    const conn = await run(() => sql.reserve());
    const q = queryable(conn, prepare);
    let closed = false;
    const end = async (stmt: 'COMMIT' | 'ROLLBACK') => {
      if (closed) return;
      closed = true;
      try {
        await q.exec(stmt);
      } finally {
        conn.release();
      }
    };
    try {
      // One round trip: BEGIN and the setup statements as one simple-protocol batch.
      await q.exec(['BEGIN', ...(opts.setup ?? [])].join('; '));
    } catch (e) {
      closed = true;
      await q.exec('ROLLBACK').catch(() => {});
      conn.release();
      throw e;
    }
    return {
      ...q,
      get closed() {
        return closed;
      },
      commit: () => end('COMMIT'),
      rollback: () => end('ROLLBACK').catch(() => {}),
    };
  }

  return {
    kind: 'external',
    describe: describeUrl(url),
    ...base,
    begin,
    transaction: (fn, opts) => runTransaction(begin, fn, opts),
    listen: (channel, cb) =>
      run(async () => {
        const sub = await sql.listen(channel, cb);
        return async () => void (await sub.unlisten());
      }),
    notify: (channel, payload) => run(async () => void (await sql.notify(channel, payload))),
    close: () => sql.end({ timeout: 5 }),
  };
}
