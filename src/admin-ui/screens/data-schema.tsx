/**
 * Data → the schema editor (docs/admin.md, "Schema editor"): "New table" beside the table
 * list, and a table's Structure view (`#/data/<table>/structure`) with its columns,
 * constraints and indexes. Every change goes through one dialog: its form, then "Preview
 * SQL" (the server's statements and warnings, nothing changed), then "Apply" (one audited
 * transaction written as the next migration file, which the toast names). Editing the form
 * after a preview asks for a new one.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { body, get, post, type AdminBody, type AdminData } from '../api';
import {
  Badge,
  Button,
  ErrorNote,
  Field,
  FormModal,
  ListTable,
  Loading,
  TextField,
  fieldError,
  formError,
  useAsync,
  useSubmit,
} from '../components/ui';
import { Icon } from '../components/icons';
import { toast } from '../components/toast';
import type { TableInfo } from './data-row';
import { Select } from './data-access';

type Change = AdminBody<'schema'>['changes'][number];
type ColumnSpec = Extract<Change, { op: 'add_column' }>['column'];
type Structure = AdminData<'structure'>;
type Preview = AdminData<'schemaPreview'>;

/** Offered in the type fields; any other type PostgreSQL knows is taken too. */
const TYPES = [
  'text',
  'varchar(255)',
  'bigint',
  'integer',
  'numeric(12,2)',
  'double precision',
  'boolean',
  'uuid',
  'timestamptz',
  'date',
  'jsonb',
  'bytea',
  'text[]',
];
const EXPRESSIONS = ['now()', 'current_date', 'gen_random_uuid()', 'basalt.uid()'] as const;
const ON_DELETE = ['no action', 'restrict', 'cascade', 'set null', 'set default'] as const;
type OnDelete = (typeof ON_DELETE)[number];

/** A default as the forms hold it: none, a value, or one of the known expressions. */
type DefaultChoice = '' | 'value' | (typeof EXPRESSIONS)[number];
function defaultOf(choice: DefaultChoice, value: string): ColumnSpec['default'] {
  if (choice === '') return undefined;
  return choice === 'value' ? { value } : { expression: choice };
}

function Check({
  label,
  checked,
  onValue,
}: {
  label: ComponentChildren;
  checked: boolean;
  onValue: (v: boolean) => void;
}) {
  return (
    <label class="check">
      <input type="checkbox" checked={checked} onChange={() => onValue(!checked)} /> {label}
    </label>
  );
}

/** A name the server checks (letters, digits and _, at most 63), its error from `field` under it. */
function NameField({
  field,
  error,
  ...rest
}: {
  label: string;
  value: string;
  onValue: (v: string) => void;
  field: string;
  error: unknown;
  autoFocus?: boolean;
}) {
  return <TextField {...rest} error={fieldError(error, field)} spellcheck={false} maxLength={63} />;
}

/** Columns to pick (a unique constraint, an index, a foreign key), in the table's order. */
function ColumnPicks({
  columns,
  value,
  onValue,
}: {
  columns: string[];
  value: string[];
  onValue: (v: string[]) => void;
}) {
  return (
    <fieldset>
      <legend>Columns</legend>
      <div class="checks">
        {columns.map((c) => (
          <Check
            key={c}
            label={c}
            checked={value.includes(c)}
            onValue={(on) =>
              onValue(on ? columns.filter((x) => x === c || value.includes(x)) : value.filter((x) => x !== c))
            }
          />
        ))}
      </div>
    </fieldset>
  );
}

/**
 * The dialog every schema change goes through: `fields(error)` are its inputs (the server's
 * field errors passed in), `changes()` what they make. First "Preview SQL", then "Apply".
 */
function ChangeDialog({
  title,
  changes,
  onClose,
  onDone,
  fields,
  rendered = [],
  wide,
}: {
  title: string;
  changes: () => Change[];
  onClose: () => void;
  onDone: (file: string) => void;
  fields: (error: unknown) => ComponentChildren;
  /** The request fields whose errors `fields` shows under an input; any other error stands above the form. */
  rendered?: string[];
  wide?: boolean;
}) {
  const [preview, setPreview] = useState<(Preview & { key: string }) | null>(null);
  const current = JSON.stringify(changes());
  const shown = preview?.key === current ? preview : null;
  // The preview stands below the form: brought into view when it arrives.
  const shownRef = useRef<HTMLElement>(null);
  useEffect(() => shownRef.current?.scrollIntoView({ block: 'nearest' }), [preview]);
  const { busy, error, submit } = useSubmit(async () => {
    const list = changes();
    if (!shown) {
      const r = await post<Preview>('/data/tables/preview', body('schema', { changes: list }));
      setPreview({ ...r, key: JSON.stringify(list) });
      return;
    }
    const r = await post<AdminData<'schemaApplied'>>('/data/tables', body('schema', { changes: list }));
    const file = r.migration.file.split('/').pop() ?? r.migration.file;
    toast(`${title}: done. Written to ${file} in migrations.dir.`);
    onDone(file);
  });
  return (
    <FormModal
      wide={wide}
      title={title}
      onClose={onClose}
      busy={busy}
      action={shown ? 'Apply' : 'Preview SQL'}
      onSubmit={submit}
      // A field's own error stands under it; the rest (PostgreSQL's refusal of a change) above the form.
      error={formError(error, rendered)}
    >
      {fields(error)}
      {shown && (
        <section class="schema-preview" aria-label="SQL preview" ref={shownRef}>
          {shown.warnings.map((w, i) => (
            <div class="notice notice-warn" role="note" key={i}>
              {w.message}
            </div>
          ))}
          <p class="muted">
            Runs in one transaction, waiting at most 5 s for the table's lock, and is written as the next file of
            migrations.dir:
          </p>
          <pre class="sql">
            <code>{shown.statements.map((s) => `${s};`).join('\n')}</code>
          </pre>
        </section>
      )}
    </FormModal>
  );
}

const columnFields = (at: string) => [`${at}.name`, `${at}.type`, `${at}.references.table`];

/** One column's fields: shared by "Add column" and each column of "New table". */
interface ColumnDraft {
  name: string;
  type: string;
  not_null: boolean;
  unique: boolean;
  defaultChoice: DefaultChoice;
  defaultValue: string;
  references: string;
  onDelete: OnDelete;
}
const emptyColumn = (): ColumnDraft => ({
  name: '',
  type: 'text',
  not_null: false,
  unique: false,
  defaultChoice: '',
  defaultValue: '',
  references: '',
  onDelete: 'no action',
});
function specOf(d: ColumnDraft): ColumnSpec {
  return {
    name: d.name,
    type: d.type,
    ...(d.not_null ? { not_null: true } : {}),
    ...(d.unique ? { unique: true } : {}),
    ...(d.defaultChoice ? { default: defaultOf(d.defaultChoice, d.defaultValue) } : {}),
    ...(d.references ? { references: { table: d.references, on_delete: d.onDelete } } : {}),
  };
}

function ColumnFields({
  draft,
  set,
  tables,
  error,
  at,
}: {
  draft: ColumnDraft;
  set: (d: ColumnDraft) => void;
  tables: string[];
  error: unknown;
  /** The column's field in the request, e.g. `changes[0].column`. */
  at: string;
}) {
  const up = (patch: Partial<ColumnDraft>) => set({ ...draft, ...patch });
  return (
    <div class="column-fields">
      <div class="row">
        <NameField
          label="Column name"
          value={draft.name}
          onValue={(name) => up({ name })}
          error={error}
          field={`${at}.name`}
        />
        <Field label="Type" error={fieldError(error, `${at}.type`)}>
          {(id, d) => (
            <>
              <input
                id={id}
                aria-describedby={d}
                list="schema-types"
                value={draft.type}
                spellcheck={false}
                onInput={(e) => up({ type: e.currentTarget.value })}
              />
              <datalist id="schema-types">
                {TYPES.map((t) => (
                  <option key={t} value={t} />
                ))}
              </datalist>
            </>
          )}
        </Field>
      </div>
      <div class="row">
        <Select
          label="Default"
          value={draft.defaultChoice}
          options={['', 'value', ...EXPRESSIONS] as DefaultChoice[]}
          names={{ '': 'none', value: 'a value…' }}
          onValue={(defaultChoice) => up({ defaultChoice })}
        />
        {draft.defaultChoice === 'value' && (
          <TextField
            label="Default value"
            value={draft.defaultValue}
            onValue={(defaultValue) => up({ defaultValue })}
            spellcheck={false}
          />
        )}
        <Select
          label="References"
          value={draft.references}
          options={['', ...tables]}
          names={{ '': 'nothing' }}
          onValue={(references) => up({ references })}
        />
        {draft.references && (
          <Select
            label="On delete"
            value={draft.onDelete}
            options={ON_DELETE}
            onValue={(onDelete) => up({ onDelete })}
          />
        )}
      </div>
      {fieldError(error, `${at}.references.table`) && (
        <p class="field-error" role="alert">
          {fieldError(error, `${at}.references.table`)}
        </p>
      )}
      <div class="checks">
        <Check label="Not null" checked={draft.not_null} onValue={(not_null) => up({ not_null })} />
        <Check label="Unique" checked={draft.unique} onValue={(unique) => up({ unique })} />
      </div>
    </div>
  );
}

/** "New table": a name, its key, whether each row belongs to the user who wrote it, columns. */
export function NewTable({
  tables,
  onClose,
  onDone,
}: {
  tables: string[];
  onClose: () => void;
  onDone: (t: string) => void;
}) {
  const [name, setName] = useState('');
  const [key, setKey] = useState<'identity' | 'uuid'>('identity');
  const [owned, setOwned] = useState(false);
  const [columns, setColumns] = useState<ColumnDraft[]>([emptyColumn()]);
  return (
    <ChangeDialog
      wide
      title={name ? `New table ${name}` : 'New table'}
      onClose={onClose}
      onDone={() => onDone(name)}
      rendered={['changes[0].table', ...columns.flatMap((_, i) => columnFields(`changes[0].columns[${i}]`))]}
      changes={() => [
        {
          op: 'create_table',
          table: name,
          primary_key: key,
          owned,
          columns: columns.filter((c) => c.name.trim()).map(specOf),
        },
      ]}
      fields={(error) => (
        <>
          <NameField
            label="Table name"
            value={name}
            onValue={setName}
            error={error}
            field={'changes[0].table'}
            autoFocus
          />
          <Select
            label="Primary key id"
            value={key}
            options={['identity', 'uuid'] as const}
            names={{
              identity: 'bigint generated always as identity',
              uuid: 'uuid default gen_random_uuid()',
            }}
            onValue={setKey}
          />
          <Check
            label={
              <span>
                Owned by the signed-in user: an <code>owner</code> column set to <code>basalt.uid()</code>, row-level
                security on, and a policy letting each user read and write only their own rows
              </span>
            }
            checked={owned}
            onValue={setOwned}
          />
          {columns.map((c, i) => (
            <fieldset key={i}>
              <legend>Column {i + 1}</legend>
              <ColumnFields
                draft={c}
                set={(d) => setColumns(columns.map((x, j) => (j === i ? d : x)))}
                tables={tables}
                error={error}
                at={`changes[0].columns[${i}]`}
              />
              {columns.length > 1 && (
                <Button variant="ghost" icon="x" onClick={() => setColumns(columns.filter((_, j) => j !== i))}>
                  Remove column {i + 1}
                </Button>
              )}
            </fieldset>
          ))}
          <div>
            <Button icon="plus" onClick={() => setColumns([...columns, emptyColumn()])}>
              Another column
            </Button>
          </div>
        </>
      )}
    />
  );
}

type Dialog =
  | { kind: 'add_column' }
  | { kind: 'alter'; column: Structure['columns'][number] }
  | { kind: 'rename'; column: string }
  | { kind: 'drop'; change: Change; title: string }
  | { kind: 'constraint' }
  | { kind: 'index' };

/** A table's columns, constraints and indexes, and the changes to them. */
export function StructureView({
  table,
  tables,
  onChanged,
}: {
  table: TableInfo;
  tables: string[];
  onChanged: () => void;
}) {
  const path = `/data/tables/${encodeURIComponent(table.name)}`;
  const s = useAsync(() => get<Structure>(path), [table.name]);
  const [dialog, setDialog] = useState<Dialog | null>(null);
  const done = () => {
    setDialog(null);
    s.reload();
    onChanged();
  };
  const close = () => setDialog(null);
  const t = table.name;
  const columns = s.data?.columns.map((c) => c.name) ?? [];
  return (
    <section class="panel" aria-label={`Structure of ${t}`}>
      <div class="panel-head">
        <h2>
          {t}{' '}
          <span class="muted" style={{ fontWeight: 400 }}>
            · columns, constraints, indexes
          </span>
        </h2>
        <div class="page-actions">
          <a class="btn btn-secondary" href={`#/data/${encodeURIComponent(t)}`}>
            Rows
          </a>
          <a class="btn btn-secondary" href={`#/data/${encodeURIComponent(t)}/access`}>
            <Icon name="lock" size={16} /> Access
          </a>
        </div>
      </div>
      <ErrorNote error={s.error} onRetry={s.reload} />
      {s.loading && !s.data && <Loading />}
      {s.data && (
        <div class="panel-body access structure">
          <div class="panel-head">
            <h3>Columns</h3>
            <Button icon="plus" onClick={() => setDialog({ kind: 'add_column' })}>
              Add column
            </Button>
          </div>
          <div data-testid="columns">
            <ListTable free>
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Type</th>
                  <th>Null</th>
                  <th>Default</th>
                  <th>
                    <span class="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {s.data.columns.map((c) => (
                  <tr key={c.name}>
                    <td>
                      {c.name} {table.primary_key.includes(c.name) && <Badge tone="accent">key</Badge>}
                    </td>
                    <td class="nowrap">
                      <code>{c.type}</code>
                    </td>
                    <td class="nowrap">{c.not_null ? 'not null' : <span class="muted">null</span>}</td>
                    <td>
                      {c.identity ? (
                        <code>generated {c.identity} as identity</code>
                      ) : (
                        c.default && <code>{c.default}</code>
                      )}
                    </td>
                    <td class="row-actions">
                      <Button
                        variant="ghost"
                        icon="edit"
                        aria-label={`Change ${c.name}`}
                        onClick={() => setDialog({ kind: 'alter', column: c })}
                      >
                        Change
                      </Button>
                      <Button
                        variant="ghost"
                        aria-label={`Rename ${c.name}`}
                        onClick={() => setDialog({ kind: 'rename', column: c.name })}
                      >
                        Rename
                      </Button>
                      <Button
                        variant="ghost"
                        icon="trash"
                        aria-label={`Drop ${c.name}`}
                        onClick={() =>
                          setDialog({
                            kind: 'drop',
                            title: `Drop column ${c.name}`,
                            change: { op: 'drop_column', table: t, column: c.name },
                          })
                        }
                      >
                        Drop
                      </Button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </ListTable>
          </div>

          <Definitions
            title="Constraints"
            add="Add constraint"
            onAdd={() => setDialog({ kind: 'constraint' })}
            rows={s.data.constraints.map((c) => ({
              name: c.name,
              definition: c.definition,
              drop:
                c.type === 'primary_key'
                  ? undefined
                  : { op: 'drop_constraint', table: t, name: c.name, title: `Drop constraint ${c.name}` },
            }))}
            onDrop={(title, change) => setDialog({ kind: 'drop', title, change })}
          />
          <Definitions
            title="Indexes"
            add="Add index"
            onAdd={() => setDialog({ kind: 'index' })}
            rows={s.data.indexes.map((x) => ({
              name: x.name,
              badge: x.constraint ? (x.constraint === x.name ? 'constraint' : x.constraint) : undefined,
              definition: x.definition,
              // An index behind a constraint goes with the constraint.
              drop: x.constraint
                ? undefined
                : { op: 'drop_index', table: t, name: x.name, title: `Drop index ${x.name}` },
            }))}
            onDrop={(title, change) => setDialog({ kind: 'drop', title, change })}
          />
        </div>
      )}
      {dialog?.kind === 'add_column' && <AddColumn table={t} tables={tables} onClose={close} onDone={done} />}
      {dialog?.kind === 'alter' && <AlterColumn table={t} column={dialog.column} onClose={close} onDone={done} />}
      {dialog?.kind === 'rename' && <RenameColumn table={t} column={dialog.column} onClose={close} onDone={done} />}
      {dialog?.kind === 'drop' && (
        <ChangeDialog
          title={dialog.title}
          changes={() => [dialog.change]}
          onClose={close}
          onDone={done}
          fields={() => <p>Preview the SQL and what depends on it before it runs. A drop cannot be undone.</p>}
        />
      )}
      {dialog?.kind === 'constraint' && (
        <AddConstraint table={t} columns={columns} tables={tables} onClose={close} onDone={done} />
      )}
      {dialog?.kind === 'index' && <AddIndex table={t} columns={columns} onClose={close} onDone={done} />}
    </section>
  );
}

type Drop = Extract<Change, { op: 'drop_constraint' | 'drop_index' }> & { title: string };

/** Constraints or indexes: name, definition as PostgreSQL prints it, and a Drop where one may. */
function Definitions({
  title,
  add,
  onAdd,
  rows,
  onDrop,
}: {
  title: string;
  add: string;
  onAdd: () => void;
  rows: { name: string; badge?: string; definition: string; drop?: Drop }[];
  onDrop: (title: string, change: Change) => void;
}) {
  return (
    <>
      <div class="panel-head">
        <h3>{title}</h3>
        <Button icon="plus" onClick={onAdd}>
          {add}
        </Button>
      </div>
      <div data-testid={title.toLowerCase()}>
        <ListTable free>
          <thead>
            <tr>
              <th>Name</th>
              <th>Definition</th>
              <th>
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map(({ name, badge, definition, drop }) => (
              <tr key={name}>
                <td>
                  {name} {badge && <Badge>{badge}</Badge>}
                </td>
                <td>
                  <code>{definition}</code>
                </td>
                <td class="row-actions">
                  {drop && (
                    <Button
                      variant="ghost"
                      icon="trash"
                      aria-label={`Drop ${name}`}
                      onClick={() => {
                        const { title: label, ...change } = drop;
                        onDrop(label, change);
                      }}
                    >
                      Drop
                    </Button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </ListTable>
      </div>
    </>
  );
}

interface Props {
  table: string;
  onClose: () => void;
  onDone: () => void;
}

function AddColumn({ table, tables, onClose, onDone }: Props & { tables: string[] }) {
  const [draft, setDraft] = useState(emptyColumn());
  return (
    <ChangeDialog
      title={`Add a column to ${table}`}
      onClose={onClose}
      onDone={onDone}
      changes={() => [{ op: 'add_column', table, column: specOf(draft) }]}
      rendered={columnFields('changes[0].column')}
      fields={(error) => (
        <ColumnFields draft={draft} set={setDraft} tables={tables} error={error} at="changes[0].column" />
      )}
    />
  );
}

function AlterColumn({ table, column, onClose, onDone }: Props & { column: Structure['columns'][number] }) {
  const [type, setType] = useState(column.type);
  const [notNull, setNotNull] = useState(column.not_null);
  const [choice, setChoice] = useState<'keep' | 'drop' | DefaultChoice>('keep');
  const [value, setValue] = useState('');
  return (
    <ChangeDialog
      title={`Change ${table}.${column.name}`}
      rendered={['changes[0].type']}
      onClose={onClose}
      onDone={onDone}
      changes={() => [
        {
          op: 'alter_column',
          table,
          column: column.name,
          ...(type !== column.type ? { type } : {}),
          ...(notNull !== column.not_null ? { not_null: notNull } : {}),
          ...(choice === 'keep'
            ? {}
            : { default: choice === 'drop' ? null : defaultOf(choice as DefaultChoice, value) }),
        },
      ]}
      fields={(error) => (
        <>
          <TextField
            label="Type"
            value={type}
            onValue={setType}
            error={fieldError(error, 'changes[0].type')}
            spellcheck={false}
            hint="Values are converted with a cast (USING column::type); a type that needs a rewrite is warned about."
          />
          <Check label="Not null" checked={notNull} onValue={setNotNull} />
          <div class="row">
            <Select
              label="Default"
              value={choice}
              options={['keep', 'drop', 'value', ...EXPRESSIONS] as ('keep' | 'drop' | DefaultChoice)[]}
              names={{
                keep: column.default ? `keep ${column.default}` : 'keep (none)',
                drop: 'none',
                value: 'a value…',
              }}
              onValue={setChoice}
            />
            {choice === 'value' && (
              <TextField label="Default value" value={value} onValue={setValue} spellcheck={false} />
            )}
          </div>
        </>
      )}
    />
  );
}

function RenameColumn({ table, column, onClose, onDone }: Props & { column: string }) {
  const [to, setTo] = useState(column);
  return (
    <ChangeDialog
      title={`Rename ${table}.${column}`}
      onClose={onClose}
      onDone={onDone}
      changes={() => [{ op: 'rename_column', table, column, to }]}
      rendered={['changes[0].to']}
      fields={(error) => (
        <NameField label="New name" value={to} onValue={setTo} error={error} field={'changes[0].to'} autoFocus />
      )}
    />
  );
}

function AddConstraint({ table, columns, tables, onClose, onDone }: Props & { columns: string[]; tables: string[] }) {
  const [kind, setKind] = useState<'unique' | 'check' | 'foreign_key'>('foreign_key');
  const [picked, setPicked] = useState<string[]>([]);
  const [expression, setExpression] = useState('');
  const [target, setTarget] = useState(tables.find((x) => x !== table) ?? tables[0] ?? '');
  const [onDelete, setOnDelete] = useState<OnDelete>('no action');
  const [name, setName] = useState('');
  const named = name.trim() ? { name: name.trim() } : {};
  return (
    <ChangeDialog
      title={`Add a constraint to ${table}`}
      rendered={['changes[0].expression', 'changes[0].name']}
      onClose={onClose}
      onDone={onDone}
      changes={() => [
        kind === 'unique'
          ? { op: 'add_unique', table, columns: picked, ...named }
          : kind === 'check'
            ? { op: 'add_check', table, expression, ...named }
            : {
                op: 'add_foreign_key',
                table,
                columns: picked,
                references: { table: target },
                on_delete: onDelete,
                ...named,
              },
      ]}
      fields={(error) => (
        <>
          <Select
            label="Kind"
            value={kind}
            options={['foreign_key', 'unique', 'check'] as const}
            names={{ foreign_key: 'foreign key', unique: 'unique', check: 'check' }}
            onValue={setKind}
          />
          {kind !== 'check' && <ColumnPicks columns={columns} value={picked} onValue={setPicked} />}
          {kind === 'check' && (
            <TextField
              label="Check expression"
              value={expression}
              onValue={setExpression}
              error={fieldError(error, 'changes[0].expression')}
              placeholder={`${columns[1] ?? 'amount'} IS NOT NULL`}
              spellcheck={false}
            />
          )}
          {kind === 'foreign_key' && (
            <div class="row">
              <Select label="References table" value={target} options={tables} onValue={setTarget} />
              <Select label="On delete" value={onDelete} options={ON_DELETE} onValue={setOnDelete} />
            </div>
          )}
          {kind === 'foreign_key' && (
            <p class="field-hint">The columns reference the other table's primary key, in order.</p>
          )}
          <NameField label="Name (optional)" value={name} onValue={setName} error={error} field={'changes[0].name'} />
        </>
      )}
    />
  );
}

function AddIndex({ table, columns, onClose, onDone }: Props & { columns: string[] }) {
  const [picked, setPicked] = useState<string[]>([]);
  const [unique, setUnique] = useState(false);
  const [name, setName] = useState('');
  return (
    <ChangeDialog
      title={`Add an index to ${table}`}
      rendered={['changes[0].name']}
      onClose={onClose}
      onDone={onDone}
      changes={() => [
        {
          op: 'add_index',
          table,
          columns: picked,
          ...(unique ? { unique } : {}),
          ...(name.trim() ? { name: name.trim() } : {}),
        },
      ]}
      fields={(error) => (
        <>
          <ColumnPicks columns={columns} value={picked} onValue={setPicked} />
          <Check label="Unique" checked={unique} onValue={setUnique} />
          <NameField label="Name (optional)" value={name} onValue={setName} error={error} field={'changes[0].name'} />
        </>
      )}
    />
  );
}
