/**
 * Data: the data schema's tables; a grid paged with the Database API's filters and sort
 * (estimated totals on big tables, long cells cut); insert, edit, delete rows; bulk
 * delete; CSV export (streamed by the server) and import; each table's Access view
 * (`#/data/<table>/access`, data-access.tsx).
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, body, get, post, type AdminData } from '../api';
import {
  Button,
  Empty,
  ErrorNote,
  Field,
  FormModal,
  Loading,
  PageHeader,
  TextAreaField,
  confirm,
  fieldError,
  formError,
  useAsync,
  useSubmit,
} from '../components/ui';
import { Icon } from '../components/icons';
import { toast } from '../components/toast';
import { cell, dateTime, number } from '../format';
import { arrivals, navigate, route } from '../router';
import { RowForm, keyOf, type TableInfo } from './data-row';
import { RowRelations } from './data-relations';
import { FilterEditor, type Filter } from './data-filters';
import { titleOf } from '../screen-list';
import { AccessView } from './data-access';
import { NewTable, StructureView } from './data-schema';

interface Sort {
  field: string;
  direction: 'asc' | 'desc';
}
type Page = AdminData<'rows'>;

const LIMIT = 50;

/** Copies `basalt types --role user` (docs/client.md, Types): the schema as the JS client's `DB` type. */
function TypesButton() {
  const copy = async () => {
    try {
      const { types } = await get<AdminData<'types'>>('/data/types?role=user');
      await navigator.clipboard.writeText(types);
      toast('TypeScript types (as signed-in users see the schema) copied: pass them to createClient<DB>.');
    } catch (e) {
      toast(`Types not copied: ${(e as Error).message}`, 'error');
    }
  };
  return (
    <Button icon="copy" onClick={copy} title="Copy the TypeScript types of the schema for the JS client">
      Types
    </Button>
  );
}

export function Data() {
  const tables = useAsync(() => get<AdminData<'tables'>>('/data/tables'), []);
  const name = route.value.parts[1];
  const table = tables.data?.tables.find((t) => t.name === name);
  const names = tables.data?.tables.map((t) => t.name) ?? [];
  const [creating, setCreating] = useState(false);
  return (
    <>
      <PageHeader
        title={titleOf('data')}
        subtitle="Tables of the data schema. Changes here go straight to the database and are recorded in the audit log."
        actions={
          <>
            <Button icon="plus" onClick={() => setCreating(true)}>
              New table
            </Button>
            <TypesButton />
          </>
        }
      />
      {creating && (
        <NewTable
          tables={names}
          onClose={() => setCreating(false)}
          onDone={(t) => {
            setCreating(false);
            tables.reload();
            navigate(`/data/${t}/structure`);
          }}
        />
      )}
      <ErrorNote error={tables.error} onRetry={tables.reload} />
      {tables.loading && !tables.data && <Loading />}
      {tables.data && !tables.data.tables.length && (
        <section class="panel">
          <Empty icon="data" title="The data schema has no tables">
            Create one with "New table" (written to migrations.dir as a migration), or add a SQL file to migrations.dir
            (e.g. <code>001_init.sql</code>) and restart, or run <code>basalt migrate</code>.
          </Empty>
        </section>
      )}
      {!!tables.data?.tables.length && (
        <div class="data-layout">
          <nav class="panel" aria-label="Tables">
            <ul class="table-list">
              {tables.data.tables.map((t) => (
                <li key={t.name}>
                  <a
                    href={`#/data/${encodeURIComponent(t.name)}`}
                    class={t.name === name ? 'active' : ''}
                    aria-current={t.name === name ? 'page' : undefined}
                  >
                    <span>{t.name}</span>
                    {t.rows !== null ? (
                      <small title={`${number(t.rows)} rows`}>{compact(t.rows)}</small>
                    ) : (
                      <small title={`about ${number(t.estimated_rows)} rows (the planner's estimate)`}>
                        ≈ {compact(t.estimated_rows)}
                      </small>
                    )}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          {table && route.value.parts[2] === 'access' ? (
            <AccessView key={table.name} table={table} />
          ) : table && route.value.parts[2] === 'structure' ? (
            <StructureView key={table.name} table={table} tables={names} onChanged={tables.reload} />
          ) : table ? (
            // A new address (a link, the table list, back) shows its own rows: the grid starts again from it.
            <Grid
              key={`${table.name} ${arrivals.value}`}
              table={table}
              tables={tables.data.tables}
              onChanged={tables.reload}
            />
          ) : (
            <section class="panel">
              <Empty icon="data" title={name ? `No table named ${name}` : 'Pick a table'}>
                {!name && 'Its rows appear here, with filters, sorting and CSV export.'}
              </Empty>
            </section>
          )}
        </div>
      )}
    </>
  );
}

function compact(n: number): string {
  if (n < 0) return '?';
  if (n < 1000) return String(n);
  if (n < 1e6) return `${(n / 1e3).toFixed(n < 1e4 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(n < 1e7 ? 1 : 0)}M`;
}

/** A JSON list from the address (`?f=` filters, `?s=` sort), or none when it is not one. */
function fromQuery<T>(name: string): T[] {
  try {
    const v = JSON.parse(route.value.query.get(name) ?? '[]');
    return Array.isArray(v) ? v : [];
  } catch {
    return [];
  }
}

/** `onChanged`: rows were added or removed (the table list's counts follow). */
function Grid({ table, tables, onChanged }: { table: TableInfo; tables: TableInfo[]; onChanged: () => void }) {
  // Filters, sort and page live in the address too, so a reload or a shared link shows the same rows.
  const [filters, setFilters] = useState<Filter[]>(() => fromQuery<Filter>('f'));
  const [sort, setSort] = useState<Sort[]>(() => fromQuery<Sort>('s'));
  const [offset, setOffset] = useState(() => Math.max(0, Number(route.value.query.get('o')) || 0));
  useEffect(() => {
    navigate(
      `/data/${table.name}`,
      {
        f: filters.length ? JSON.stringify(filters) : undefined,
        s: sort.length ? JSON.stringify(sort) : undefined,
        o: offset ? String(offset) : undefined,
      },
      true,
    );
  }, [filters, sort, offset]);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [editing, setEditing] = useState<Record<string, unknown> | 'new' | null>(null);
  const [importing, setImporting] = useState(false);
  // The page remembers its offset: while the next one loads, the pager still describes the rows shown.
  const page = useAsync(
    () =>
      post<Page>(
        `/data/${encodeURIComponent(table.name)}/select`,
        body('select', { filters, sort, limit: LIMIT, offset }),
      ).then((p) => ({ ...p, offset })),
    [filters, sort, offset],
  );
  useEffect(() => setSelected(new Set()), [filters, sort, offset]);
  const editable = table.primary_key.length > 0;
  const rows = page.data?.rows ?? [];
  const total = page.data?.total;
  const estimated = page.data?.estimated_total ?? table.estimated_rows;
  const shownOffset = page.data?.offset ?? offset;
  const hasNext = total !== undefined ? shownOffset + rows.length < total : rows.length === LIMIT;

  const toggleSort = (c: string) => {
    const cur = sort.find((s) => s.field === c);
    setOffset(0);
    setSort(!cur ? [{ field: c, direction: 'asc' }] : cur.direction === 'asc' ? [{ field: c, direction: 'desc' }] : []);
  };
  const rowId = (r: Record<string, unknown>) => JSON.stringify(keyOf(table, r));
  const allSelected = rows.length > 0 && rows.every((r) => selected.has(rowId(r)));
  const toggle = (id: string) => {
    const s = new Set(selected);
    s.has(id) ? s.delete(id) : s.add(id);
    setSelected(s);
  };
  const bulkDelete = async () => {
    const n = selected.size;
    if (
      !(await confirm({
        title: `Delete ${n} row${n === 1 ? '' : 's'} from ${table.name}?`,
        body: <p>All of them are deleted, or none if one cannot be (e.g. still referenced). This cannot be undone.</p>,
        action: 'Delete',
        danger: true,
      }))
    )
      return;
    try {
      const r = await post<AdminData<'deleted'>>(
        `/data/${encodeURIComponent(table.name)}/delete`,
        body('deleteRows', {
          keys: [...selected].map((s) => JSON.parse(s)),
        }),
      );
      toast(`${r.count} row${r.count === 1 ? '' : 's'} deleted.`);
      setSelected(new Set());
      page.reload();
      onChanged();
    } catch (e) {
      toast(`Nothing deleted: ${(e as Error).message}`, 'error');
    }
  };
  const exportHref =
    `/api/admin/data/${encodeURIComponent(table.name)}/export.csv?` +
    new URLSearchParams({ filters: JSON.stringify(filters), sort: JSON.stringify(sort) });
  const from = rows.length ? shownOffset + 1 : 0;
  return (
    <section class="panel" aria-label={`Table ${table.name}`}>
      <div class="panel-head">
        <h2>
          {table.name}{' '}
          <span class="muted" style={{ fontWeight: 400 }}>
            {table.columns.length} columns{!editable && ' · no primary key: read-only'}
          </span>
        </h2>
        <div class="page-actions">
          {selected.size > 0 && (
            <Button variant="danger" icon="trash" onClick={bulkDelete}>
              Delete selected ({selected.size})
            </Button>
          )}
          {editable && (
            <Button icon="plus" onClick={() => setEditing('new')}>
              Insert row
            </Button>
          )}
          <Button icon="upload" onClick={() => setImporting(true)}>
            Import CSV
          </Button>
          <a class="btn btn-secondary" href={`#/data/${encodeURIComponent(table.name)}/structure`}>
            <Icon name="edit" size={16} /> Structure
          </a>
          <a class="btn btn-secondary" href={`#/data/${encodeURIComponent(table.name)}/access`}>
            <Icon name="lock" size={16} /> Access
          </a>
          <a class="btn btn-secondary" href={exportHref} download={`${table.name}.csv`}>
            <Icon name="download" size={16} /> Export CSV
          </a>
        </div>
      </div>
      <FilterEditor
        columns={table.columns}
        applied={filters}
        onApply={(f) => {
          setOffset(0);
          setFilters(f);
        }}
        error={page.error instanceof ApiError && page.error.status === 400 ? page.error : undefined}
      />
      {!(page.error instanceof ApiError && page.error.status === 400) && (
        <ErrorNote error={page.error} onRetry={page.reload} />
      )}
      <div class="table-wrap" aria-busy={page.loading}>
        <table class="grid">
          <thead>
            <tr>
              {editable && (
                <th class="check-cell">
                  <input
                    type="checkbox"
                    aria-label="Select all rows on this page"
                    checked={allSelected}
                    onChange={() => setSelected(allSelected ? new Set() : new Set(rows.map(rowId)))}
                  />
                </th>
              )}
              {editable && (
                <th class="edit-cell">
                  <span class="sr-only">Edit</span>
                </th>
              )}
              {table.columns.map((c) => {
                const s = sort.find((x) => x.field === c.name);
                return (
                  <th
                    key={c.name}
                    class={kindOf(c.type) === 'number' ? 'num' : undefined}
                    aria-sort={s ? (s.direction === 'asc' ? 'ascending' : 'descending') : undefined}
                  >
                    <button
                      type="button"
                      class="sort-btn"
                      onClick={() => toggleSort(c.name)}
                      aria-label={`Sort by ${c.name}`}
                    >
                      {c.name}
                      <span class="col-type">{c.type}</span>
                      {s && <Icon name={s.direction === 'asc' ? 'sortUp' : 'sortDown'} size={13} />}
                    </button>
                  </th>
                );
              })}
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => {
              const id = rowId(r);
              return (
                <tr
                  key={id}
                  class={selected.has(id) ? 'selected' : ''}
                  onDblClick={editable ? () => setEditing(r) : undefined}
                >
                  {editable && (
                    <td class="check-cell">
                      <input
                        type="checkbox"
                        aria-label={`Select row ${table.primary_key.map((k) => String(r[k])).join(', ')}`}
                        checked={selected.has(id)}
                        onChange={() => toggle(id)}
                      />
                    </td>
                  )}
                  {editable && (
                    <td class="edit-cell">
                      <button
                        type="button"
                        class="icon-btn icon-btn-sm"
                        onClick={() => setEditing(r)}
                        aria-label={`Edit row ${table.primary_key.map((k) => String(r[k])).join(', ')}`}
                        title="Edit row"
                      >
                        <Icon name="edit" size={15} />
                      </button>
                    </td>
                  )}
                  {table.columns.map((c) => (
                    <Cell key={c.name} v={r[c.name]} kind={kindOf(c.type)} />
                  ))}
                </tr>
              );
            })}
          </tbody>
        </table>
        {page.data && !rows.length && (
          <Empty icon="filter" title={filters.length ? 'No row matches these filters' : 'This table is empty'} />
        )}
        {page.loading && !page.data && <Loading />}
      </div>
      <div class="pager">
        <span class="pager-info" data-testid="pager-info">
          {rows.length ? `Rows ${number(from)}–${number(shownOffset + rows.length)}` : 'No rows'}
          {total !== undefined ? ` of ${number(total)}` : estimated > 0 ? ` of ≈ ${number(estimated)}` : ''}
          {page.loading && page.data && (
            <>
              {' '}
              · <span class="spinner" role="img" aria-label="Loading" />
            </>
          )}
        </span>
        <div class="page-actions">
          <Button
            icon="chevronLeft"
            disabled={shownOffset === 0 || page.loading}
            onClick={() => setOffset(Math.max(0, shownOffset - LIMIT))}
          >
            Previous
          </Button>
          <Button disabled={!hasNext || page.loading} onClick={() => setOffset(shownOffset + LIMIT)}>
            Next <Icon name="chevronRight" size={16} />
          </Button>
        </div>
      </div>
      {editing && (
        <RowForm
          table={table}
          row={editing === 'new' ? null : editing}
          lead={
            editing !== 'new' &&
            table.relations.length > 0 && <RowRelations table={table} tables={tables} row={editing} />
          }
          onClose={() => setEditing(null)}
          onDone={() => {
            setEditing(null);
            page.reload();
            onChanged();
          }}
        />
      )}
      {importing && (
        <ImportCsv
          table={table}
          onClose={() => setImporting(false)}
          onDone={() => {
            setImporting(false);
            page.reload();
            onChanged();
          }}
        />
      )}
    </section>
  );
}

type Kind = 'number' | 'time' | 'other';
/** How a column's values read: numbers right-aligned, timestamps as the other screens show times. */
function kindOf(type: string): Kind {
  if (/^(smallint|integer|bigint|numeric|decimal|real|double precision|money)\b/.test(type)) return 'number';
  if (/^timestamp\b/.test(type)) return 'time';
  return 'other';
}

function Cell({ v, kind }: { v: unknown; kind: Kind }) {
  if (v === null || v === undefined) return <td class={`cell cell-null ${kind === 'number' ? 'num' : ''}`}>null</td>;
  const full = typeof v === 'string' ? v : JSON.stringify(v);
  if (kind === 'time' && typeof v === 'string')
    return (
      <td class="cell cell-time" title={v}>
        {dateTime(v)}
      </td>
    );
  return (
    <td class={`cell ${kind === 'number' ? 'num' : ''}`} title={full.length > 120 ? full.slice(0, 2000) : full}>
      {cell(v)}
    </td>
  );
}

function ImportCsv({ table, onClose, onDone }: { table: TableInfo; onClose: () => void; onDone: () => void }) {
  const [csv, setCsv] = useState('');
  const pick = async (e: Event) => {
    const f = (e.currentTarget as HTMLInputElement).files?.[0];
    if (f) setCsv(await f.text());
  };
  const { busy, error, submit } = useSubmit(async () => {
    const r = await post<AdminData<'imported'>>(
      `/data/${encodeURIComponent(table.name)}/import`,
      body('importCsv', { csv }),
    );
    toast(`${number(r.inserted)} rows imported into ${table.name}.`);
    onDone();
  });
  return (
    <FormModal
      wide
      title={`Import CSV into ${table.name}`}
      onClose={onClose}
      busy={busy}
      action="Import"
      onSubmit={submit}
      lead={
        <p class="muted">
          The first row names the columns, any of: {table.columns.map((c) => c.name).join(', ')}. All rows are inserted,
          or none: a bad row is named by its line.
        </p>
      }
      error={formError(error, ['csv'])}
    >
      <Field label="CSV file">{(id) => <input id={id} type="file" accept=".csv,text/csv" onChange={pick} />}</Field>
      <TextAreaField
        label="CSV text"
        rows={8}
        value={csv}
        onValue={setCsv}
        error={fieldError(error, 'csv')}
        hint="The picked file's text, to check or edit before the import; or paste CSV here."
      />
    </FormModal>
  );
}
