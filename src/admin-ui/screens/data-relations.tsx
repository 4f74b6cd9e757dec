/**
 * A row's relations in its dialog (docs/admin.md, "Data browser"): for each many-to-one
 * key a link to the related row, named by its label column when one is obvious; for each
 * one-to-many relation (`<table>_via_<column>`) how many rows refer to this one, linked to
 * that table filtered by it. One select of the row with the Database API's `expand`
 * (docs/database.md, "Relations") answers all of them, in one statement.
 */
import type { ComponentChildren } from 'preact';
import type { Filter, QUERY_BOUNDS } from '../../modules/database/model';
import { body, post, type AdminData } from '../api';
import { ErrorNote, useAsync } from '../components/ui';
import { href } from '../router';
import { keyOf, type TableInfo } from './data-row';

type Relation = TableInfo['relations'][number];
type Row = Record<string, unknown>;

/** Relations one request may expand (the Database API's bound); a table with more asks again per batch. */
const PER_REQUEST: (typeof QUERY_BOUNDS)['relations'] = 10;
/**
 * Children are counted up to this many ("100+" beyond): the count stays bounded however
 * many rows refer to this one, as the grid's counts do on big tables.
 */
export const CHILDREN_COUNTED = 100;

/** Column names that read as a row's name, best first. */
const LABELS = ['name', 'title', 'label', 'display_name', 'full_name', 'username', 'email', 'slug', 'code'];
const isText = (type: string) => /^(text|character|citext)/.test(type);

/** The column that names a row of `t`, when one is obvious (a text column called name, title, …). */
export function labelColumn(t: TableInfo | undefined): string | undefined {
  if (!t) return undefined;
  for (const name of LABELS) {
    const c = t.columns.find((x) => x.name === name);
    if (c && isText(c.type)) return c.name;
  }
  return undefined;
}

/** The filters of `rel.table`'s rows that go with `row` through the relation (key column = this row's value). */
function filtersOf(rel: Relation, row: Row): Filter[] {
  return rel.columns.map((mine, i) => ({ field: rel.target_columns[i]!, op: 'eq', value: row[mine] }));
}

/** `#/data/<table>` showing the rows that go with `row` through `rel`. */
const linkOf = (rel: Relation, row: Row) => href(`/data/${rel.table}`, { f: JSON.stringify(filtersOf(rel, row)) });

/** What `expand` asks for each relation: the related row's key and label; up to CHILDREN_COUNTED children's keys. */
function expandOf(rels: Relation[], tables: TableInfo[]): Record<string, unknown> {
  return Object.fromEntries(
    rels.map((rel) => {
      if (rel.kind === 'one_to_many') return [rel.name, { fields: [rel.target_columns[0]], limit: CHILDREN_COUNTED }];
      const label = labelColumn(tables.find((t) => t.name === rel.table));
      return [rel.name, { fields: [...new Set([...rel.target_columns, ...(label ? [label] : [])])] }];
    }),
  );
}

const valueText = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));
const tuple = (xs: string[]) => (xs.length === 1 ? xs[0]! : `(${xs.join(', ')})`);

export function RowRelations({ table, tables, row }: { table: TableInfo; tables: TableInfo[]; row: Row }) {
  const rels = table.relations;
  const related = useAsync(async () => {
    const batches: Relation[][] = [];
    for (let i = 0; i < rels.length; i += PER_REQUEST) batches.push(rels.slice(i, i + PER_REQUEST));
    const filters = Object.entries(keyOf(table, row)).map(([field, value]) => ({ field, op: 'eq', value }));
    const answers = await Promise.all(
      batches.map((b) =>
        post<AdminData<'rows'>>(
          `/data/${encodeURIComponent(table.name)}/select`,
          body('select', { filters, limit: 1, expand: expandOf(b, tables) }),
        ),
      ),
    );
    // undefined: the row is gone (deleted since the page was read).
    if (answers.some((a) => !a.rows.length)) return undefined;
    return Object.assign({}, ...answers.map((a) => a.rows[0]!.expand as Record<string, unknown>)) as Row;
  }, [table.name, JSON.stringify(keyOf(table, row))]);
  if (!rels.length) return null;
  const expand = related.data;
  return (
    <section class="relations" aria-label="Relations" aria-busy={related.loading}>
      <h3>Relations</h3>
      <ErrorNote error={related.error} onRetry={related.reload} />
      {!related.loading && !related.error && !expand && (
        <p class="muted">This row is no longer there: it was deleted since the page was read.</p>
      )}
      <dl class="kv">
        {rels.map((rel) => (
          <RelationItem key={rel.name} rel={rel} row={row} expand={expand} tables={tables} />
        ))}
      </dl>
    </section>
  );
}

function RelationItem({
  rel,
  row,
  expand,
  tables,
}: {
  rel: Relation;
  row: Row;
  expand: Row | undefined;
  tables: TableInfo[];
}) {
  let shown: ComponentChildren;
  if (!expand) shown = <span class="muted">…</span>;
  else if (rel.kind === 'many_to_one') {
    const keys = rel.columns.map((c) => row[c]);
    const target = expand[rel.name] as Row | null | undefined;
    const label = labelColumn(tables.find((t) => t.name === rel.table));
    // `id = 1`, `(a, b) = (1, x)`: the related row's key.
    const key = `${tuple(rel.target_columns)} = ${tuple(keys.map(valueText))}`;
    const name = label && target?.[label] != null ? valueText(target[label]) : undefined;
    shown = keys.some((v) => v === null || v === undefined) ? (
      <span class="cell-null">null</span>
    ) : target ? (
      <>
        <a href={linkOf(rel, row)}>{name ?? key}</a>{' '}
        <span class="muted">
          in {rel.table}
          {name !== undefined && ` (${key})`}
        </span>
      </>
    ) : (
      <span class="muted">
        no row of {rel.table} has {key}
      </span>
    );
  } else {
    const n = ((expand[rel.name] as unknown[] | undefined) ?? []).length;
    const count = n >= CHILDREN_COUNTED ? `${CHILDREN_COUNTED}+ rows` : `${n} row${n === 1 ? '' : 's'}`;
    shown = (
      <>
        {n ? <a href={linkOf(rel, row)}>{count}</a> : <span class="muted">no rows</span>}{' '}
        <span class="muted">
          in {rel.table} by {rel.target_columns.join(', ')}
        </span>
      </>
    );
  }
  return (
    <>
      <dt>
        <code>{rel.name}</code>
      </dt>
      <dd>{shown}</dd>
    </>
  );
}
