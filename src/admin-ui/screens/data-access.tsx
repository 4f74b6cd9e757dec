/**
 * Data → a table → Access (docs/database.md, "Users' own data", "In the panel"): what
 * `basalt_user` and `basalt_anon` may do with the table, row-level security, its policies,
 * the warnings, whether it emits realtime changes, and "try as a user". Each change is
 * staged (checked by the server, its SQL shown); "Apply" runs every staged change in one
 * audited transaction written as one migration file, which the toast names.
 */
import { useState } from 'preact/hooks';
import { body, get, post } from '../api';
import {
  Badge,
  Button,
  Empty,
  ErrorNote,
  Field,
  FormModal,
  Loading,
  TextField,
  confirm,
  fieldError,
  useAsync,
  useSubmit,
} from '../components/ui';
import { toast } from '../components/toast';
import { cell, number } from '../format';
import type { TableAccess } from '../../modules/admin/data-access';
import type { AccessChange } from '../../modules/admin/data-access-changes';
import type { TableInfo } from './data-row';

type Role = 'basalt_user' | 'basalt_anon';
const ROLES: Role[] = ['basalt_user', 'basalt_anon'];
/** Who acts as each role, beside its name in the policy form. */
const ROLE_WHO: Record<Role, string> = { basalt_user: 'signed-in users', basalt_anon: 'requests without a user' };
const COLUMN_PRIVILEGES = ['SELECT', 'INSERT', 'UPDATE'] as const;
const COMMANDS = ['ALL', 'SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const;

export function AccessView({ table }: { table: TableInfo }) {
  const path = `/data/${encodeURIComponent(table.name)}/access`;
  const access = useAsync(() => get<TableAccess>(path), [table.name]);
  const [granting, setGranting] = useState(false);
  const [newPolicy, setNewPolicy] = useState(false);
  const [staged, setStaged] = useState<Staged[]>([]);
  const [applying, setApplying] = useState(false);
  const [applyError, setApplyError] = useState<unknown>(null);
  /** Check a change (its SQL; a refusal is thrown for the form to show) and stage it. */
  const stage: Stage = async (change, label) => {
    const r = await post<{ statements: string[] }>(`${path}/preview`, body('access', { changes: [change] }));
    setStaged((list) => [...list, { change, label, statements: r.statements }]);
    setApplyError(null);
  };
  const unstage = (i: number) => setStaged((list) => list.filter((_, j) => j !== i));
  /** Every staged change in one request: one transaction, one migration file. */
  const applyAll = async () => {
    setApplying(true);
    setApplyError(null);
    try {
      const r = await post<{ access: TableAccess; migration: { file: string } }>(
        path,
        body('access', { changes: staged.map((x) => x.change) }),
      );
      const done = staged.length === 1 ? staged[0]!.label : `${staged.length} changes applied.`;
      toast(`${done} Written to ${r.migration.file.split('/').pop()} in migrations.dir.`);
      setStaged([]);
      access.reload();
    } catch (e) {
      setApplyError(e);
    } finally {
      setApplying(false);
    }
  };
  /** A switch: staged as the opposite of its current state; pressed again, unstaged. */
  const toggle = async (op: 'rls' | 'realtime', enabled: boolean) => {
    const at = staged.findIndex((x) => x.change.op === op);
    if (at !== -1) return unstage(at);
    try {
      await stage(
        { op, enabled },
        `${op === 'rls' ? 'Row-level security' : 'Realtime'} turned ${enabled ? 'on' : 'off'}.`,
      );
    } catch (e) {
      toast(`Not staged: ${(e as Error).message}`, 'error');
    }
  };
  const drop = async (name: string) => {
    if (
      !(await confirm({
        title: `Drop the policy ${name}?`,
        body: <p>Once applied, the rows it let users see or write are no longer reachable through it.</p>,
        action: 'Drop',
        danger: true,
      }))
    )
      return;
    try {
      await stage({ op: 'drop_policy', name }, `Policy ${name} dropped.`);
    } catch (e) {
      toast(`Not staged: ${(e as Error).message}`, 'error');
    }
  };
  const pending = (op: 'rls' | 'realtime') =>
    staged.find((x) => x.change.op === op)?.change as { enabled: boolean } | undefined;
  const dropping = (name: string) => staged.some((x) => x.change.op === 'drop_policy' && x.change.name === name);
  const a = access.data;
  return (
    <section class="panel" aria-label={`Access to ${table.name}`}>
      <div class="panel-head">
        <h2>
          {table.name}{' '}
          <span class="muted" style={{ fontWeight: 400 }}>
            · who may read and write it
          </span>
        </h2>
        <div class="page-actions">
          <a class="btn btn-secondary" href={`#/data/${encodeURIComponent(table.name)}`}>
            Rows
          </a>
          <a class="btn btn-secondary" href={`#/data/${encodeURIComponent(table.name)}/structure`}>
            Structure
          </a>
        </div>
      </div>
      <ErrorNote error={access.error} onRetry={access.reload} />
      {access.loading && !a && <Loading />}
      {a && (
        <div class="panel-body access">
          {a.warnings.map((w) => (
            <div class="notice notice-warn" role="note" key={w.code + (w.column ?? '')}>
              {w.message}
            </div>
          ))}
          {staged.length > 0 && (
            <section class="card staged" aria-label="Staged changes">
              <div class="staged-head">
                <strong>
                  {staged.length} change{staged.length === 1 ? '' : 's'} staged
                </strong>
                <span class="muted">applied together, in one transaction, as one migration file</span>
                <div class="page-actions">
                  <Button
                    onClick={() => {
                      setStaged([]);
                      setApplyError(null);
                    }}
                  >
                    Discard
                  </Button>
                  <Button variant="primary" busy={applying} onClick={applyAll}>
                    Apply {staged.length} change{staged.length === 1 ? '' : 's'}
                  </Button>
                </div>
              </div>
              <ol class="staged-list">
                {staged.map((x, i) => (
                  <li key={i}>
                    <div class="staged-item">
                      <span>{x.label}</span>
                      <Button variant="ghost" icon="x" onClick={() => unstage(i)} aria-label={`Unstage: ${x.label}`}>
                        Remove
                      </Button>
                    </div>
                    <code>{x.statements.map((st) => `${st};`).join('\n')}</code>
                  </li>
                ))}
              </ol>
              <ErrorNote error={applyError} />
            </section>
          )}
          <div class="access-switches">
            <div class="card access-switch">
              <div>
                <strong>Row-level security</strong> <Badge tone={a.rls ? 'ok' : 'warn'}>{a.rls ? 'on' : 'off'}</Badge>{' '}
                {pending('rls') && <Badge tone="info">staged: {pending('rls')!.enabled ? 'on' : 'off'}</Badge>}
                <p class="muted">
                  {a.rls
                    ? 'Users and anon reach only the rows a policy allows.'
                    : 'Off: a role granted the table reaches every row.'}
                </p>
              </div>
              <Button onClick={() => toggle('rls', !a.rls)}>
                {pending('rls') ? 'Unstage' : a.rls ? 'Turn off' : 'Turn on'}
              </Button>
            </div>
            <div class="card access-switch">
              <div>
                <strong>Realtime</strong>{' '}
                <Badge tone={a.realtime ? 'ok' : 'neutral'}>{a.realtime ? 'on' : 'off'}</Badge>{' '}
                {pending('realtime') && (
                  <Badge tone="info">staged: {pending('realtime')!.enabled ? 'on' : 'off'}</Badge>
                )}
                <p class="muted">
                  {a.realtime
                    ? 'Changes are streamed to subscribers allowed to see them.'
                    : table.primary_key.length
                      ? 'Changes are not streamed.'
                      : 'Needs a primary key to emit changes.'}
                </p>
              </div>
              <Button
                onClick={() => toggle('realtime', !a.realtime)}
                disabled={!a.realtime && !table.primary_key.length}
              >
                {pending('realtime') ? 'Unstage' : a.realtime ? 'Turn off' : 'Turn on'}
              </Button>
            </div>
          </div>

          <div class="panel-head">
            <h3>Grants</h3>
            <Button icon="plus" onClick={() => setGranting(true)}>
              Grant or revoke
            </Button>
          </div>
          <div class="table-wrap">
            <table class="grid" data-testid="grants">
              <thead>
                <tr>
                  <th>Column</th>
                  {ROLES.map((r) => (
                    <th key={r}>{r}</th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {table.columns.map((c) => (
                  <tr key={c.name}>
                    <td>{c.name}</td>
                    {ROLES.map((r) => (
                      <td key={r}>{(a.roles[r]?.columns[c.name] ?? []).join(', ') || <span class="muted">—</span>}</td>
                    ))}
                  </tr>
                ))}
                <tr>
                  <td>
                    <em>delete rows</em>
                  </td>
                  {ROLES.map((r) => (
                    <td key={r}>{a.roles[r]?.delete ? 'DELETE' : <span class="muted">—</span>}</td>
                  ))}
                </tr>
              </tbody>
            </table>
          </div>

          <div class="panel-head">
            <h3>Policies</h3>
            <Button icon="plus" onClick={() => setNewPolicy(true)}>
              New policy
            </Button>
          </div>
          {a.policies.length ? (
            <div class="table-wrap">
              <table class="grid" data-testid="policies">
                <thead>
                  <tr>
                    <th>Name</th>
                    <th>For</th>
                    <th>Roles</th>
                    <th>Using</th>
                    <th>With check</th>
                    <th>
                      <span class="sr-only">Drop</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {a.policies.map((p) => (
                    <tr key={p.name}>
                      <td>
                        {p.name} {!p.permissive && <Badge tone="info">restrictive</Badge>}
                      </td>
                      <td>{p.command}</td>
                      <td>{p.roles.join(', ')}</td>
                      <td>{p.using && <code>{p.using}</code>}</td>
                      <td>{p.with_check && <code>{p.with_check}</code>}</td>
                      <td>
                        <Button
                          variant="danger"
                          icon="trash"
                          onClick={() => drop(p.name)}
                          aria-label={`Drop ${p.name}`}
                          disabled={dropping(p.name)}
                        >
                          {dropping(p.name) ? 'Staged' : 'Drop'}
                        </Button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          ) : (
            <Empty icon="lock" title="No policies">
              {a.rls ? 'With row-level security on and no policy, users and anon see no row.' : undefined}
            </Empty>
          )}

          <TryAs table={table} />
        </div>
      )}
      {granting && (
        <GrantForm
          table={table}
          onClose={() => setGranting(false)}
          stage={async (c, done) => {
            await stage(c, done);
            setGranting(false);
          }}
        />
      )}
      {newPolicy && (
        <PolicyForm
          table={table}
          onClose={() => setNewPolicy(false)}
          stage={async (c, done) => {
            await stage(c, done);
            setNewPolicy(false);
          }}
        />
      )}
    </section>
  );
}

/** A change checked by the server (its SQL) and waiting for "Apply". */
interface Staged {
  change: AccessChange;
  label: string;
  statements: string[];
}
type Stage = (change: AccessChange, label: string) => Promise<void>;

/** A labelled choice among `options`, each shown by its `names` entry or as it is (also the schema editor's). */
export function Select<T extends string>({
  label,
  value,
  options,
  onValue,
  names,
}: {
  label: string;
  value: T;
  options: readonly T[];
  onValue: (v: T) => void;
  names?: Partial<Record<T, string>>;
}) {
  return (
    <Field label={label}>
      {(id) => (
        <select id={id} value={value} onChange={(e) => onValue(e.currentTarget.value as T)}>
          {options.map((o) => (
            <option key={o} value={o}>
              {names?.[o] ?? o}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

function GrantForm({ table, onClose, stage }: { table: TableInfo; onClose: () => void; stage: Stage }) {
  const [op, setOp] = useState<'grant' | 'revoke'>('grant');
  const [role, setRole] = useState<Role>('basalt_user');
  const [privilege, setPrivilege] = useState<'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE'>('SELECT');
  const [columns, setColumns] = useState('');
  const { busy, error, submit } = useSubmit(async () => {
    const cols = columns
      .split(',')
      .map((c) => c.trim())
      .filter(Boolean);
    await stage(
      { op, role, privilege, ...(cols.length ? { columns: cols } : {}) },
      `${op === 'grant' ? 'Granted' : 'Revoked'} ${privilege}${cols.length ? ` (${cols.join(', ')})` : ''} ${op === 'grant' ? 'to' : 'from'} ${role}.`,
    );
  });
  return (
    <FormModal
      title={`Grants on ${table.name}`}
      onClose={onClose}
      busy={busy}
      action="Stage"
      onSubmit={submit}
      error={error}
    >
      <Select label="Change" value={op} options={['grant', 'revoke'] as const} onValue={setOp} />
      <Select label="Role" value={role} options={ROLES} onValue={setRole} />
      <Select
        label="Privilege"
        value={privilege}
        options={[...COLUMN_PRIVILEGES, 'DELETE'] as const}
        onValue={setPrivilege}
      />
      <TextField
        label="Columns (optional)"
        value={columns}
        onValue={setColumns}
        error={fieldError(error, 'changes[0]')}
        placeholder={table.columns.map((c) => c.name).join(', ')}
        hint="Comma-separated; empty: the whole table. A grant of INSERT also grants the serial columns' sequences."
        spellcheck={false}
      />
    </FormModal>
  );
}

function PolicyForm({ table, onClose, stage }: { table: TableInfo; onClose: () => void; stage: Stage }) {
  const [name, setName] = useState('');
  const [command, setCommand] = useState<(typeof COMMANDS)[number]>('ALL');
  const [roles, setRoles] = useState<Role[]>(['basalt_user']);
  const [using, setUsing] = useState('');
  // An example on this table's own columns: its owner-looking uuid column if it has one.
  const owner = table.columns.find((c) => /owner|user/.test(c.name) && /uuid/.test(c.type))?.name ?? 'owner_id';
  const [check, setCheck] = useState('');
  const [restrictive, setRestrictive] = useState(false);
  const { busy, error, submit } = useSubmit(async () => {
    await stage(
      {
        op: 'create_policy',
        name,
        command,
        roles,
        permissive: !restrictive,
        using: command === 'INSERT' ? null : using || null,
        with_check: command === 'SELECT' || command === 'DELETE' ? null : check || null,
      },
      `Policy ${name} created.`,
    );
  });
  // The server names the expression PostgreSQL refused (changes[0].using / .with_check); the rest is the form's.
  const usingProblem = fieldError(error, 'changes[0].using');
  const checkProblem = fieldError(error, 'changes[0].with_check');
  const hasCheck = command !== 'SELECT' && command !== 'DELETE';
  return (
    <FormModal
      wide
      title="New policy"
      onClose={onClose}
      busy={busy}
      action="Stage"
      onSubmit={submit}
      error={usingProblem || checkProblem ? undefined : error}
    >
      <TextField label="Name" value={name} onValue={setName} required maxLength={63} autoFocus />
      <Select label="For" value={command} options={COMMANDS} onValue={setCommand} />
      <fieldset>
        <legend>Roles</legend>
        <div class="checks">
          {ROLES.map((r) => (
            <label key={r} class="check">
              <input
                type="checkbox"
                checked={roles.includes(r)}
                onChange={() => setRoles(roles.includes(r) ? roles.filter((x) => x !== r) : [...roles, r])}
              />{' '}
              {r} <span class="muted">({ROLE_WHO[r]})</span>
            </label>
          ))}
        </div>
      </fieldset>
      {command !== 'INSERT' && (
        <TextField
          label="Using (rows it may see or change)"
          value={using}
          onValue={setUsing}
          spellcheck={false}
          error={usingProblem}
          placeholder={`${owner} = basalt.uid()`}
          hint={
            <>
              A SQL expression on the row, e.g. <code>{owner} = basalt.uid()</code> for rows a user owns
            </>
          }
        />
      )}
      {hasCheck && (
        <TextField
          label="With check (rows it may write)"
          value={check}
          onValue={setCheck}
          spellcheck={false}
          error={checkProblem}
          hint="Empty: the Using expression applies"
        />
      )}
      <label class="check">
        <input type="checkbox" checked={restrictive} onChange={() => setRestrictive(!restrictive)} /> Restrictive: a row
        must pass this policy too (AND), instead of any one policy letting it through (OR)
      </label>
    </FormModal>
  );
}

function TryAs({ table }: { table: TableInfo }) {
  const [userId, setUserId] = useState('');
  const [result, setResult] = useState<{ rows: Record<string, unknown>[]; count: number; as: string } | null>(null);
  const { busy, error, submit } = useSubmit(async () => {
    setResult(null);
    setResult(
      await post(
        `/data/${encodeURIComponent(table.name)}/try-as`,
        body('tryAs', {
          user_id: userId.trim() || null,
          limit: 20,
        }),
      ),
    );
  });
  const columns = result?.rows[0] ? Object.keys(result.rows[0]) : [];
  return (
    <div class="try-as">
      <div class="panel-head">
        <h3>Try as a user</h3>
      </div>
      <form class="form form-inline" onSubmit={submit}>
        <TextField
          label="Site user id"
          value={userId}
          onValue={setUserId}
          placeholder="empty: anon"
          error={fieldError(error, 'user_id')}
          spellcheck={false}
        />
        <Button type="submit" variant="primary" busy={busy}>
          Run select
        </Button>
      </form>
      <ErrorNote error={fieldError(error, 'user_id') ? undefined : error} />
      {result && (
        <div data-testid="try-as-result">
          <p class="muted">
            As {result.as}: {number(result.count)} row{result.count === 1 ? '' : 's'} (at most 20 shown). Read-only;
            recorded in the audit log.
          </p>
          {result.rows.length > 0 && (
            <div class="table-wrap">
              <table class="grid">
                <thead>
                  <tr>
                    {columns.map((c) => (
                      <th key={c}>{c}</th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {result.rows.map((r, i) => (
                    <tr key={i}>
                      {columns.map((c) => (
                        <td key={c} class="cell">
                          {cell(r[c])}
                        </td>
                      ))}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </div>
      )}
    </div>
  );
}
