/**
 * What the data browser (browser.ts) shares with its CSV export and import (export.ts,
 * import.ts): apart from them, so that none of the three imports another's caller.
 */
import type { Queryable } from '../../../db/engine';
import type { Platform } from '../../../platform';
import type { Catalog, CatalogSnapshot, Table } from '../catalog';
import type { QueryBody } from '../model';
import type { Statement } from '../query-builder';

export type Row = Record<string, unknown>;

/** Internals shared with the CSV export and import (export.ts, import.ts). */
export interface BrowserCore {
  p: Platform;
  catalog: Catalog;
  /** The table named, from the live catalog (reloaded once on a miss); 404 when the data schema has none. */
  resolve(name: unknown, via?: Queryable): Promise<{ snap: CatalogSnapshot; table: Table }>;
  /** Build a Database API statement for the table; an unknown column reloads the catalog once, then is a 400 naming it. */
  build(
    name: string,
    body: (t: Table) => QueryBody,
    via?: Queryable,
  ): Promise<{ st: Statement; snap: CatalogSnapshot; table: Table }>;
  /** Run a write in the caller's transaction, mapping Postgres errors like the Database API. */
  write(tx: Queryable, built: { st: Statement; snap: CatalogSnapshot; table: Table }): Promise<Row[]>;
  /** Catalog reads inside the caller's transaction must use it on the embedded engine (it holds the only session). */
  via(tx: Queryable): Queryable | undefined;
}
