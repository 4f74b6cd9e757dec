/**
 * The one boundary where src/ reads a value in a shape that its package's declarations do
 * not state: the embedded engine's WebAssembly module, which PGlite keeps `protected`, the
 * protocol methods and locks of a PGlite instance that src/db/embedded-wire.ts drives, the
 * options postgres.js resolved for a pool (`sql.options`: host, user, password, run-time
 * parameters, parsers) that src/db/external.ts hands to src/db/external-wire.ts, and
 * csv-parse's `info: true` records, which its overloads type as plain rows. Nothing else in
 * src/ writes `as never` or `as unknown as` (docs/architecture.md, Layers). Each use names
 * the shape it reads; the tests of that area are what check it.
 */
export function undeclared<T>(value: unknown): T {
  return value as T;
}
