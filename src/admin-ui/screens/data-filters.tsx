/** Filters for the data grid with the Database API's operators (docs/database.md). */
import { useState } from 'preact/hooks';
import type { ApiError } from '../api';
import { Button } from '../components/ui';
import { Icon } from '../components/icons';
import { fromInput, type Column } from './data-row';
import type { Filter } from '../../modules/database/model';

/** The Database API's filter (declared once, src/modules/database/model.ts). */
export type { Filter } from '../../modules/database/model';

const OPS: { op: string; label: string }[] = [
  { op: 'eq', label: '=' },
  { op: 'neq', label: '≠' },
  { op: 'gt', label: '>' },
  { op: 'gte', label: '≥' },
  { op: 'lt', label: '<' },
  { op: 'lte', label: '≤' },
  { op: 'like', label: 'like' },
  { op: 'ilike', label: 'ilike' },
  { op: 'in', label: 'in' },
  { op: 'not_in', label: 'not in' },
  { op: 'is_null', label: 'is null' },
];

interface Draft {
  field: string;
  op: string;
  text: string;
}

function toFilter(columns: Column[], d: Draft): Filter {
  const c = columns.find((x) => x.name === d.field)!;
  if (d.op === 'is_null') return { field: d.field, op: d.op, value: d.text !== 'false' };
  if (d.op === 'in' || d.op === 'not_in')
    return { field: d.field, op: d.op, value: d.text.split(',').map((s) => fromInput(c, s.trim())) };
  if (d.op === 'like' || d.op === 'ilike') return { field: d.field, op: d.op, value: d.text };
  return { field: d.field, op: d.op, value: fromInput(c, d.text) };
}

export function FilterEditor({
  columns,
  applied,
  onApply,
  error,
}: {
  columns: Column[];
  applied: Filter[];
  onApply: (f: Filter[]) => void;
  error?: ApiError;
}) {
  const [drafts, setDrafts] = useState<Draft[]>(() =>
    applied.map((f) => ({
      field: f.field,
      op: f.op,
      text: Array.isArray(f.value) ? f.value.join(', ') : String(f.value),
    })),
  );
  const [problem, setProblem] = useState<string>();
  const update = (i: number, patch: Partial<Draft>) =>
    setDrafts(drafts.map((d, j) => (j === i ? { ...d, ...patch } : d)));
  const apply = (e: Event) => {
    e.preventDefault();
    setProblem(undefined);
    try {
      onApply(drafts.map((d) => toFilter(columns, d)));
    } catch (err) {
      setProblem((err as Error).message);
    }
  };
  const add = () => setDrafts([...drafts, { field: columns[0]!.name, op: 'eq', text: '' }]);
  const shownError = problem ?? (error ? error.message : undefined);
  return (
    <form class="filters" onSubmit={apply} aria-label="Filters">
      {drafts.map((d, i) => (
        <div class="filter-row" key={i}>
          <select
            aria-label={`Filter ${i + 1} column`}
            value={d.field}
            onChange={(e) => update(i, { field: e.currentTarget.value })}
          >
            {columns.map((c) => (
              <option key={c.name} value={c.name}>
                {c.name}
              </option>
            ))}
          </select>
          <select
            aria-label={`Filter ${i + 1} operator`}
            value={d.op}
            onChange={(e) =>
              update(i, { op: e.currentTarget.value, text: e.currentTarget.value === 'is_null' ? 'true' : d.text })
            }
          >
            {OPS.map((o) => (
              <option key={o.op} value={o.op}>
                {o.label}
              </option>
            ))}
          </select>
          {d.op === 'is_null' ? (
            <select
              aria-label={`Filter ${i + 1} value`}
              value={d.text}
              onChange={(e) => update(i, { text: e.currentTarget.value })}
            >
              <option value="true">yes (IS NULL)</option>
              <option value="false">no (IS NOT NULL)</option>
            </select>
          ) : (
            <input
              aria-label={`Filter ${i + 1} value`}
              value={d.text}
              placeholder={d.op === 'in' || d.op === 'not_in' ? 'a, b, c' : d.op.endsWith('like') ? '%text%' : 'value'}
              onInput={(e) => update(i, { text: e.currentTarget.value })}
            />
          )}
          <button
            type="button"
            class="icon-btn"
            aria-label={`Remove filter ${i + 1}`}
            onClick={() => setDrafts(drafts.filter((_, j) => j !== i))}
          >
            <Icon name="x" size={16} />
          </button>
        </div>
      ))}
      {shownError && (
        <p class="field-error" role="alert">
          {shownError}
        </p>
      )}
      <div class="row" style={{ alignItems: 'center' }}>
        <Button class="btn-sm" icon="plus" onClick={add}>
          Add filter
        </Button>
        {(drafts.length > 0 || applied.length > 0) && (
          <Button class="btn-sm" type="submit" variant="primary" icon="filter">
            Apply filters
          </Button>
        )}
        {applied.length > 0 && (
          <Button
            class="btn-sm"
            variant="ghost"
            onClick={() => {
              setDrafts([]);
              onApply([]);
            }}
          >
            Clear filters
          </Button>
        )}
        {applied.length > 0 && (
          <span class="muted">
            {applied.length} filter{applied.length === 1 ? '' : 's'} applied
          </span>
        )}
      </div>
    </form>
  );
}
