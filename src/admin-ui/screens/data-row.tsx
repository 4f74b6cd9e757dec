import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, body, patch, post, type AdminData } from '../api';
import { Button, FormModal, confirm, useAsync, useSubmit } from '../components/ui';
import { toast } from '../components/toast';

/** A table of the data schema as GET /data/tables answers it. */
export type TableInfo = AdminData<'tables'>['tables'][number];
export type Column = TableInfo['columns'][number];

/** A row's primary key: column → value, as the data routes take `key` / `keys`. */
export function keyOf(t: TableInfo, row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(t.primary_key.map((c) => [c, row[c]]));
}

/** The first values of a referenced column, offered by the browser as the input's suggestions. */
function ReferencedValues({ id, refTo }: { id: string; refTo: { table: string; column: string } }) {
  const values = useAsync(
    () =>
      post<AdminData<'rows'>>(
        `/data/${encodeURIComponent(refTo.table)}/select`,
        body('select', { sort: [{ field: refTo.column, direction: 'asc' }], limit: 200 }),
      ),
    [refTo.table, refTo.column],
  );
  return (
    <datalist id={id}>
      {(values.data?.rows ?? []).map((r) => {
        const v = String(r[refTo.column] ?? '');
        return <option key={v} value={v} />;
      })}
    </datalist>
  );
}

const isJson = (t: string) => t === 'json' || t === 'jsonb' || t.endsWith('[]');
const isBool = (t: string) => t === 'boolean' || t === 'bool';
const isFloat = (t: string) => t === 'real' || t === 'double precision' || t === 'float4' || t === 'float8';

/** A value as the text in its input. */
export function toInput(c: Column, v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  return isJson(c.type) ? JSON.stringify(v, null, 2) : String(v);
}

/** The text of an input as the Database API's value for the column (docs/database.md). */
export function fromInput(c: Column, text: string): unknown {
  if (isBool(c.type)) return text === 'true';
  if (isJson(c.type)) {
    try {
      return JSON.parse(text);
    } catch {
      throw new ApiError(400, 'validation_error', `${c.name}: not valid JSON`, {
        [c.name]: 'Not valid JSON: check quotes and brackets.',
      });
    }
  }
  if (isFloat(c.type) && text.trim() !== '' && !Number.isNaN(Number(text))) return Number(text);
  return text;
}

export function RowForm({
  table,
  row,
  lead,
  onClose,
  onDone,
}: {
  table: TableInfo;
  /** Above the fields (the row's relations, data-relations.tsx). */
  lead?: ComponentChildren;
  /** null: a new row. */
  row: Record<string, unknown> | null;
  onClose: () => void;
  onDone: () => void;
}) {
  const [text, setText] = useState<Record<string, string>>(() =>
    Object.fromEntries(table.columns.map((c) => [c.name, toInput(c, row?.[c.name])])),
  );
  const [nulls, setNulls] = useState<Record<string, boolean>>(() =>
    Object.fromEntries(table.columns.map((c) => [c.name, row ? row[c.name] === null : false])),
  );
  const { busy, error, submit, setError } = useSubmit(async () => {
    const data: Record<string, unknown> = {};
    for (const c of table.columns) {
      const t = text[c.name] ?? '';
      if (row) {
        const before = toInput(c, row[c.name]);
        const wasNull = row[c.name] === null;
        if (nulls[c.name] !== wasNull || (!nulls[c.name] && t !== before))
          data[c.name] = nulls[c.name] ? null : fromInput(c, t);
      } else if (nulls[c.name]) data[c.name] = null;
      else if (t !== '' || !(c.has_default || c.nullable)) data[c.name] = fromInput(c, t);
    }
    if (row) {
      if (!Object.keys(data).length) return onClose();
      await patch(`/data/${encodeURIComponent(table.name)}/rows`, body('updateRow', { key: keyOf(table, row), data }));
      toast('Row saved.');
    } else {
      await post(`/data/${encodeURIComponent(table.name)}/rows`, body('insertRow', { data }));
      toast(`Row inserted into ${table.name}.`);
    }
    onDone();
  });
  const fieldErr = (name: string) =>
    error instanceof ApiError
      ? (error.fields[name] ?? (error.details.column === name ? error.message : undefined))
      : undefined;
  const remove = async () => {
    if (!row) return;
    if (
      !(await confirm({
        title: 'Delete this row?',
        body: <p>This cannot be undone.</p>,
        action: 'Delete',
        danger: true,
      }))
    )
      return;
    try {
      await post(`/data/${encodeURIComponent(table.name)}/delete`, body('deleteRows', { keys: [keyOf(table, row)] }));
      toast('Row deleted.');
      onDone();
    } catch (err) {
      setError(err);
    }
  };
  const known = error instanceof ApiError && table.columns.some((c) => fieldErr(c.name));
  return (
    <FormModal
      wide
      title={row ? `Edit row of ${table.name}` : `Insert into ${table.name}`}
      onClose={onClose}
      busy={busy}
      action={row ? 'Save' : 'Insert'}
      onSubmit={submit}
      error={known ? undefined : error}
      lead={lead}
      extra={
        row && (
          <Button variant="ghost" icon="trash" onClick={remove}>
            Delete row
          </Button>
        )
      }
    >
      {table.columns.map((c) => {
        const id = `col-${c.name}`;
        const err = fieldErr(c.name);
        const pk = table.primary_key.includes(c.name);
        // A row's key identifies it: shown, never edited here (the update names the row by it).
        const fixed = pk && !!row;
        const list = c.references ? `refs-${c.name}` : undefined;
        return (
          <div class={`field ${err ? 'has-error' : ''}`} key={c.name}>
            <label for={id}>
              {c.name}{' '}
              <span class="col-type">
                {c.type}
                {pk && ' · key'}
                {!row && c.has_default && ' · default if empty'}
              </span>
            </label>
            <div class="row" style={{ flexWrap: 'nowrap', alignItems: 'center' }}>
              {isBool(c.type) ? (
                <select
                  id={id}
                  value={text[c.name] || 'false'}
                  disabled={nulls[c.name]}
                  onChange={(e) => setText({ ...text, [c.name]: e.currentTarget.value })}
                >
                  <option value="true">true</option>
                  <option value="false">false</option>
                </select>
              ) : isJson(c.type) || (text[c.name] ?? '').length > 80 ? (
                <textarea
                  id={id}
                  rows={4}
                  value={text[c.name]}
                  disabled={nulls[c.name]}
                  onInput={(e) => setText({ ...text, [c.name]: e.currentTarget.value })}
                  spellcheck={false}
                />
              ) : (
                <input
                  id={id}
                  value={text[c.name]}
                  disabled={nulls[c.name]}
                  readOnly={fixed}
                  list={list}
                  aria-describedby={fixed || c.references ? `${id}-hint` : undefined}
                  onInput={(e) => setText({ ...text, [c.name]: e.currentTarget.value })}
                />
              )}
              {c.references && <ReferencedValues id={list!} refTo={c.references} />}
              {c.nullable && (
                <label class="check">
                  <input
                    type="checkbox"
                    checked={nulls[c.name]}
                    onChange={(e) => setNulls({ ...nulls, [c.name]: e.currentTarget.checked })}
                    aria-label={`${c.name} is null`}
                  />{' '}
                  null
                </label>
              )}
            </div>
            {err ? (
              <p class="field-error" role="alert">
                {err}
              </p>
            ) : fixed ? (
              <p class="field-hint" id={`${id}-hint`}>
                The primary key names this row; it is not changed here.
              </p>
            ) : c.references ? (
              <p class="field-hint" id={`${id}-hint`}>
                References{' '}
                <a href={`#/data/${encodeURIComponent(c.references.table)}`}>
                  {c.references.table}.{c.references.column}
                </a>
                : pick one of its values or type one.
              </p>
            ) : null}
          </div>
        );
      })}
    </FormModal>
  );
}
