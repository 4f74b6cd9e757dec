/**
 * Batches of statements known up front (`Db.atOnce`) on external PostgreSQL, spoken in the wire
 * protocol on connections of their own: Parse (first time) + Describe + Bind + Execute for each
 * statement, then a single Sync, in one write and one round trip.
 *
 * Why not through postgres.js: it ends every query with a Sync, so a transaction of statements
 * sent together needs BEGIN and COMMIT around them, four statements for PostgreSQL to run and
 * four results for Basalt to handle where two do (a user's select: the identity, then the
 * select). PostgreSQL runs what comes between two Syncs as one implicit transaction: committed
 * at the Sync, or rolled back there when a statement fails (the ones after it are skipped), so a
 * `set_config(…, true)` of the batch lasts until its end and no longer, and nothing of a failed
 * batch stays open on the connection (docs/database.md, "Users' own data").
 *
 * The connections are opened with the pool's own settings as postgres.js resolved them (host,
 * port or socket path, user, password, database, run-time parameters such as statement_timeout
 * and application_name), with TLS as postgres.js sets it up for the URL's `sslmode`,
 * authenticated by password, MD5 or SCRAM-SHA-256, and their rows are parsed with the pool's own
 * parsers (the same values as postgres.js returns). A URL this path does not speak (several
 * hosts, target_session_attrs, direct TLS negotiation, a custom socket) keeps the postgres.js
 * path (`wireUnsupported`). Values go as text typed by the server, so only
 * `batchable` ones (strings, finite numbers, nulls); statements stay prepared per connection by
 * their text (at most PREPARED_MAX, the least recently used closed beyond), with their result
 * columns, so a statement seen before is only bound and run; a statement gone or outdated by a
 * schema change (26000, 0A000) makes the batch, rolled back as a whole, run once more parsed
 * anew. How many connections are in use at once is bounded by the pool's wait gate
 * (src/db/wait-gate.ts); an idle connection closes after `idleTimeoutMs`, and one released past
 * its lifetime (the pool's `max_lifetime`, postgres.js's random 30 to 60 minutes) is closed
 * then. A connection that cannot be made (refused by the server, TLS, a SCRAM exchange that does
 * not check out) is "database unavailable" (`normalizeConnectError`); the methods and modes are
 * checked by test/database/external-wire-auth.test.ts against a scratch cluster.
 *
 * The path is src/db/wire/: pool.ts (the connections, idle and lifetime), connection.ts (one
 * connection: open, batches, their answers), auth.ts (cleartext, MD5, SCRAM-SHA-256), tls.ts
 * (SSLRequest and the handshake), errors.ts (ErrorResponse, shared with the embedded engine's
 * path, and the connect errors), prepared.ts (statements kept prepared, also shared),
 * resolved-options.ts (what it is given); this file is its entry (docs/architecture.md,
 * "Speaking the PostgreSQL wire protocol").
 */
export { WirePool } from './wire/pool';
export {
  type ResolvedOptions,
  type WirePoolOptions,
  type WireStatement,
  wireUnsupported,
} from './wire/resolved-options';
